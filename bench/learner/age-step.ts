/**
 * `age`: samples/s of the example job's learner (the local learner a trainer of
 * `examples/fashion-mnist-mlp.json` runs, on the minibatches its reader hands it) once it has
 * trained for a while, against a fresh learner's, in paired rounds in this process. The other
 * learner benchmarks time fresh learners; this one shows a learner that slows as it learns, as
 * the numbers of a trained model sink toward float32's subnormal range (see
 * `LOGIT_GRADIENT_FLUSH` and `FLOAT32_MIN_NORMAL`), where x86 computes many times slower.
 */
import { parseJobSpec } from '#libs/job-spec';
import { selectBackend, TfjsLearner } from '#libs/learner';
import { learnerOptions } from '../../services/trainer/src/learner-options.js';
import { benchResult, median, round, type BenchResult } from '../bench-result.js';
import { exampleJob, exampleMinibatches, exampleTraining } from '../cluster/bench-cluster.js';
import { ALONE_MINIBATCHES, ALONE_WARM_UP_SECONDS } from '../overhead/overhead.js';
import { pairedTurns } from '../paired-turns.js';
import { measure, timeSteps, WORKLOADS } from './train-step.js';

/**
 * How long the learner trains before it is timed. Going round `overhead`'s minibatches of the
 * learner alone (12,800 images), the example's MLP rules classes out with softmax shares under
 * 2^-126 within 10 s, and 9 % of its logits' gradients were that small at 40 s.
 */
const AGE_SECONDS = 40;
/** The aged learner's progress is shown this often while it ages. */
const AGE_REPORT_SECONDS = 10;
const ROUND_SECONDS = 2;
const PAIRS = 6;
/** Target: the trained learner keeps this much of a fresh one's speed. */
const TARGET_RATIO = 0.95;

export async function runAgeStepBench(say: (line: string) => void): Promise<BenchResult[]> {
  await selectBackend('wasm');
  const workload = WORKLOADS[0]!;
  const spec = { ...exampleJob('bench-age', '/nonexistent', {}), training: exampleTraining({}) };
  const learner = learnerOptions(parseJobSpec(JSON.stringify(spec)));
  const batches = await exampleMinibatches(ALONE_MINIBATCHES, workload.batchSize, { featureBytes: true });
  const aged = new TfjsLearner(learner);
  await aged.initialize(workload.spec);
  try {
    let next = 0;
    const agedFor = async (seconds: number): Promise<number> => {
      const { steps, elapsed } = await timeSteps(async () => {
        await aged.train(batches[next++ % batches.length]!);
      }, seconds);
      return (steps * workload.batchSize) / elapsed;
    };
    // A fresh learner as `overhead` times the learner alone, on the same minibatches.
    const fresh = async (): Promise<number> =>
      (await measure(workload, ROUND_SECONDS, { batches, warmUpSeconds: ALONE_WARM_UP_SECONDS, learner }))
        .samplesPerSecond;
    say(`training the example's learner for ${AGE_SECONDS} s (wasm, MLP 784-128-10, batch 64)`);
    for (let s = 0; s < AGE_SECONDS; s += AGE_REPORT_SECONDS) {
      const rate = await agedFor(AGE_REPORT_SECONDS);
      say(`  ${s}-${s + AGE_REPORT_SECONDS} s: ${Math.round(rate)} samples/s`);
    }
    const rounds = await pairedTurns(
      PAIRS,
      { ours: () => agedFor(ROUND_SECONDS), baseline: fresh },
      (pair, trained, untrained) =>
        say(`pair ${pair + 1}: fresh ${Math.round(untrained)}, trained ${Math.round(trained)} samples/s`),
    );
    const { ratios } = rounds;
    return [
      benchResult({
        name: `age: the example's learner on wasm after ${AGE_SECONDS} s of training vs a fresh one`,
        figure: round(median(rounds.ours)),
        unit: 'samples/s',
        baseline: round(median(rounds.baseline)),
        ratio: rounds.ratio,
        target: TARGET_RATIO,
        detail:
          `ratio = median of ${PAIRS} paired rounds of ${ROUND_SECONDS} s, the fresh learner warmed up ` +
          `${ALONE_WARM_UP_SECONDS} s first (pairs from ${Math.min(...ratios).toFixed(2)} to ` +
          `${Math.max(...ratios).toFixed(2)}); both on the first ${ALONE_MINIBATCHES} minibatches of the training set`,
      }),
    ];
  } finally {
    aged.shutdown();
  }
}
