/**
 * `age`: samples/s of the example job's learner (the local learner a trainer of
 * `examples/fashion-mnist-mlp.json` runs, on the minibatches its reader hands it) once it has
 * trained for a while, against a fresh learner's, in paired rounds in this process. The other
 * learner benchmarks time fresh learners; this one shows a learner that slows as it learns, as
 * the numbers of a trained model sink toward float32's subnormal range (see
 * `LOGIT_GRADIENT_FLUSH` and `FLOAT32_MIN_NORMAL`), where x86 computes many times slower.
 */
import { parseJobSpec } from '#libs/job-spec';
import { selectBackend, TfjsLearner, type Batch, type TfjsLearnerOptions } from '#libs/learner';
import { learnerOptions } from '../../services/trainer/src/learner-options.js';
import { benchResult, median, round, type BenchResult } from '../bench-result.js';
import { exampleJob, exampleMinibatches, exampleTraining } from '../cluster/bench-cluster.js';
import { WORKLOADS } from './train-step.js';

/**
 * How long the learner trains before it is timed. Going round {@link MINIBATCHES}, the example's
 * MLP rules classes out with softmax shares under 2^-126 within 10 s, and 9 % of its logits'
 * gradients were that small at 40 s.
 */
const AGE_SECONDS = 40;
/** Minibatches both learners go round (12,800 images, as `overhead`'s learner alone). */
const MINIBATCHES = 200;
/** A fresh learner's warm-up before its round: its first second runs at about 0.77 of its rate. */
const FRESH_WARM_UP_SECONDS = 2;
const ROUND_SECONDS = 2;
const PAIRS = 6;
/** Target: the trained learner keeps this much of a fresh one's speed. */
const TARGET_RATIO = 0.95;

/** A learner and the minibatches it goes round, stepped by time. */
class Stepper {
  private next = 0;

  constructor(
    private readonly learner: TfjsLearner,
    private readonly batches: readonly Batch[],
  ) {}

  /** Trains for `seconds`; samples/s over them. */
  async trainFor(seconds: number): Promise<number> {
    const start = performance.now();
    let steps = 0;
    let elapsed = 0;
    while (elapsed < seconds * 1000) {
      await this.learner.train(this.batches[this.next++ % this.batches.length]!);
      steps++;
      elapsed = performance.now() - start;
    }
    return (steps * this.batches[0]!.size * 1000) / elapsed;
  }
}

/** A fresh learner of `options`, warmed up, then timed for a round. */
async function freshRound(options: TfjsLearnerOptions, batches: readonly Batch[]): Promise<number> {
  const learner = new TfjsLearner(options);
  await learner.initialize(WORKLOADS[0]!.spec);
  try {
    const stepper = new Stepper(learner, batches);
    await stepper.trainFor(FRESH_WARM_UP_SECONDS);
    return await stepper.trainFor(ROUND_SECONDS);
  } finally {
    learner.shutdown();
  }
}

export async function runAgeStepBench(say: (line: string) => void): Promise<BenchResult[]> {
  await selectBackend('wasm');
  const spec = { ...exampleJob('bench-age', '/nonexistent', {}), training: exampleTraining({}) };
  const options = learnerOptions(parseJobSpec(JSON.stringify(spec)));
  const batches = await exampleMinibatches(MINIBATCHES, WORKLOADS[0]!.batchSize, { featureBytes: true });
  const aged = new TfjsLearner(options);
  await aged.initialize(WORKLOADS[0]!.spec);
  try {
    const stepper = new Stepper(aged, batches);
    say(`training the example's learner for ${AGE_SECONDS} s (wasm, MLP 784-128-10, batch 64)`);
    for (let s = 0; s < AGE_SECONDS; s += 10) {
      say(`  ${s}-${s + 10} s: ${Math.round(await stepper.trainFor(10))} samples/s`);
    }
    const rounds = { aged: [] as number[], fresh: [] as number[] };
    for (let pair = 0; pair < PAIRS; pair++) {
      const fresh = () => freshRound(options, batches);
      const trained = () => stepper.trainFor(ROUND_SECONDS);
      if (pair % 2 === 0) {
        rounds.fresh.push(await fresh());
        rounds.aged.push(await trained());
      } else {
        rounds.aged.push(await trained());
        rounds.fresh.push(await fresh());
      }
      say(
        `pair ${pair + 1}: fresh ${Math.round(rounds.fresh[pair]!)}, trained ${Math.round(rounds.aged[pair]!)} samples/s`,
      );
    }
    const ratios = rounds.aged.map((value, i) => value / rounds.fresh[i]!);
    return [
      benchResult({
        name: `age: the example's learner on wasm after ${AGE_SECONDS} s of training vs a fresh one`,
        figure: round(median(rounds.aged)),
        unit: 'samples/s',
        baseline: round(median(rounds.fresh)),
        ratio: median(ratios),
        target: TARGET_RATIO,
        detail:
          `ratio = median of ${PAIRS} paired rounds of ${ROUND_SECONDS} s, the fresh learner warmed up ` +
          `${FRESH_WARM_UP_SECONDS} s first (pairs from ${Math.min(...ratios).toFixed(2)} to ` +
          `${Math.max(...ratios).toFixed(2)}); both on the first ${MINIBATCHES} minibatches of the training set`,
      }),
    ];
  } finally {
    aged.shutdown();
  }
}
