/**
 * `tta`: time to 0.85 test accuracy of the example MLP job on a local cluster of 2 trainers and
 * 2 pservers (with master and evaluator, everything as `npm run demo` runs it) against the
 * single-process loop of `single-process.ts`, both on this machine in this run; then the same
 * job in `async` and in `local` mode. The cluster's
 * time is the job's own wall time in its summary (from its start to the evaluator's stop), the
 * loop's from its first step; neither counts start-up or loading. Each cluster job is evaluated
 * every as many examples as the loop (6,400: 100 steps of 64), rounded to whole versions.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { benchResult, round, type BenchResult } from '../bench-result.js';
import { FASHION_DIR, exampleJob, startBenchCluster, submit, waitForSummary } from '../cluster/bench-cluster.js';
import { EVALUATE_EVERY_EXAMPLES, singleProcessTimeToTarget } from './single-process.js';

const TARGET_ACCURACY = 0.85;
/** Target: the cluster reaches the accuracy in at most this share of the loop's time. */
const TARGET_RATIO = 0.8;
const JOB_TIMEOUT_MS = 600_000;

/** Trainers of the cluster, each with a minibatch of the example's 64 examples per step. */
const TRAINERS = 2;
const BATCH_SIZE = 64;

/**
 * The example job as it is (`sync`), then `async` (as it comes: on 2 trainers and 2 cores,
 * overlapping pushes was slower and took more examples to the target), then
 * `local` (each trainer takes four Adam steps on its own copy per push), the mode meant for when
 * the network, not the learner, is the limit. `examplesPerVersion`: what one model version
 * stands for, so that each run is evaluated as often as the single process, in examples.
 */
const RUNS = [
  { id: 'example', label: 'the example, sync', training: {}, examplesPerVersion: TRAINERS * BATCH_SIZE },
  { id: 'async', label: 'async', training: { mode: 'async' }, examplesPerVersion: BATCH_SIZE },
  {
    id: 'local',
    label: 'local, 4 steps',
    training: { mode: 'local', localSteps: 4 },
    examplesPerVersion: TRAINERS * 4 * BATCH_SIZE,
  },
] as const;

export async function runTtaBench(say: (line: string) => void): Promise<BenchResult[]> {
  say('single process: plain TF.js loop (wasm)');
  const single = await singleProcessTimeToTarget(FASHION_DIR, TARGET_ACCURACY, say);
  say(`single process: ${single.seconds.toFixed(1)} s (${single.steps} steps)`);
  const out = mkdtempSync(join(tmpdir(), 'tributary-bench-out-'));
  const cluster = await startBenchCluster({ trainers: TRAINERS, pservers: 2, evaluators: 1 }, say);
  try {
    const results: BenchResult[] = [];
    for (const run of RUNS) {
      const id = `bench-tta-${run.id}`;
      const example = exampleJob(id, out);
      // The example evaluates every 100 versions; here every version that many examples are
      // behind, never more often than the single process.
      const everySteps = Math.ceil(EVALUATE_EVERY_EXAMPLES / run.examplesPerVersion);
      await submit(cluster.nc, {
        ...example,
        training: { ...(example['training'] as Record<string, unknown>), ...run.training },
        evaluation: { ...(example['evaluation'] as Record<string, unknown>), everySteps },
      });
      say(`cluster, ${run.label}: job submitted; waiting for the evaluator to stop it`);
      const summary = await waitForSummary(out, id, JOB_TIMEOUT_MS);
      if (summary.stopReason !== 'target')
        throw new Error(`the cluster's ${run.label} job stopped by ${summary.stopReason}, not its target`);
      say(`cluster, ${run.label}: ${summary.wallSeconds.toFixed(1)} s (${summary.steps} steps)`);
      results.push(
        benchResult({
          name: `tta: time to 0.85, 2 trainers + 2 pservers (${run.label}) vs one process`,
          figure: round(summary.wallSeconds),
          unit: 's',
          baseline: round(single.seconds),
          target: TARGET_RATIO,
          lowerIsBetter: true,
          detail:
            `cluster: ${summary.steps} steps, evaluated every ${everySteps}, best ${summary.bestValue}, ` +
            `${Math.round(summary.samplesPerSecond)} samples/s; ` +
            `one process: ${single.steps} steps, ${single.accuracy.toFixed(4)}, ` +
            `${Math.round((single.steps * BATCH_SIZE) / single.seconds)} samples/s`,
        }),
      );
    }
    return results;
  } finally {
    await cluster.stop();
    rmSync(out, { recursive: true, force: true });
  }
}
