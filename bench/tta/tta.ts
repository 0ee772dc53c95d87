/**
 * `tta`: time to 0.85 test accuracy of the example MLP job on a local cluster of 2 trainers and
 * 2 pservers (with master and evaluator, everything as `npm run demo` runs it) against the
 * single-process loop of `single-process.ts`, both on this machine in this run; then the same
 * job in `sync`, `async` and `local` mode with 4 steps a round (plain and with overlapped
 * rounds). The cluster's
 * time is the job's own wall time in its summary (from its start to the evaluator's stop), the
 * loop's from its first step; neither counts start-up or loading. Each cluster job is evaluated
 * every as many examples as the loop (6,400: 100 steps of 64), rounded down to whole versions. Each
 * is run {@link RUNS_EACH} times, after one warm-up run of the loop and one of the cluster that
 * are not counted, and its median taken: how many examples a run needs to reach the
 * accuracy varies from run to run (89,600 to 166,400 here), and so does its time.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { JobSummary } from '#libs/messaging';
import { benchResult, median, round, type BenchResult } from '../bench-result.js';
import {
  FASHION_DIR,
  exampleJob,
  exampleTraining,
  startBenchCluster,
  type BenchCluster,
  submit,
  waitForSummary,
} from '../cluster/bench-cluster.js';
import { EVALUATE_EVERY_EXAMPLES, singleProcessTimeToTarget } from './single-process.js';

const TARGET_ACCURACY = 0.85;
/** Target: the cluster reaches the accuracy in at most this share of the loop's time. */
const TARGET_RATIO = 0.8;
const JOB_TIMEOUT_MS = 600_000;
/** Runs of the single process and of each cluster job; the figures are their medians. */
const RUNS_EACH = 5;

/** Trainers of the cluster, each with a minibatch of the example's 64 examples per step. */
const TRAINERS = 2;
const BATCH_SIZE = 64;

/** Records in one chunk of the converted Fashion-MNIST. */
const CHUNK_RECORDS = 1_000;

/** The example job's training settings. */
const EXAMPLE_TRAINING = exampleTraining({}) as { chunksPerTask?: number; localSteps?: number };

/**
 * Examples in one task of the example job: `chunksPerTask` chunks. A `local` round ends early
 * with its task (10 chunks at 32 steps: four rounds of 2,048 examples and one of 1,808).
 */
const TASK_EXAMPLES = CHUNK_RECORDS * (EXAMPLE_TRAINING.chunksPerTask ?? 1);

/** Examples one model version stands for in `local` mode, on average: one round of each trainer. */
function localVersionExamples(localSteps: number): number {
  const roundsPerTask = Math.ceil(TASK_EXAMPLES / (localSteps * BATCH_SIZE));
  return (TRAINERS * TASK_EXAMPLES) / roundsPerTask;
}

/**
 * The example job as it is (`local` with 32 steps, 2,048 examples a round), then `sync` (one
 * step a version, every trainer's gradient averaged), `async` (as it comes: on 2 trainers and 2
 * cores, overlapping pushes was slower and took more examples to the target), `local` with
 * four Adam steps per push, and `local` with `overlapRounds` (each trainer trains its next
 * round while the last one's delta is averaged). The examples a run needs hardly change with
 * the steps per round
 * (2 trainers simulated in one process, 4 seeds: medians 102,400 examples at 2 steps, about
 * 106,000 at 4, 109,568 at 8 and 110,592 at 16), while the exchange is paid four times less
 * often; on the cluster here 16 steps took about 1.2 times the examples of 4, at 1.4 times the
 * samples/s, and 32 steps (every version evaluated) 1.1 times the examples of 16 (every third),
 * at 1.3 times the samples/s (medians of six interleaved jobs each). `examplesPerVersion`: what one model version stands for, so that each run is evaluated
 * at least as often as the single process, in examples.
 */
const RUNS = [
  {
    id: 'example',
    label: `the example: local, ${EXAMPLE_TRAINING.localSteps} steps`,
    training: {},
    examplesPerVersion: localVersionExamples(EXAMPLE_TRAINING.localSteps ?? 1),
  },
  { id: 'sync', label: 'sync', training: { mode: 'sync' }, examplesPerVersion: TRAINERS * BATCH_SIZE },
  { id: 'async', label: 'async', training: { mode: 'async' }, examplesPerVersion: BATCH_SIZE },
  {
    id: 'local',
    label: 'local, 4 steps',
    training: { mode: 'local', localSteps: 4 },
    examplesPerVersion: localVersionExamples(4),
  },
  {
    id: 'local-overlapped',
    label: 'local, 4 steps, overlapped rounds',
    training: { mode: 'local', localSteps: 4, overlapRounds: true },
    examplesPerVersion: localVersionExamples(4),
  },
] as const;

export async function runTtaBench(say: (line: string) => void): Promise<BenchResult[]> {
  const singles: Awaited<ReturnType<typeof singleProcessTimeToTarget>>[] = [];
  say('single process, warm-up run (not counted)');
  await singleProcessTimeToTarget(FASHION_DIR, TARGET_ACCURACY, () => undefined);
  for (let r = 1; r <= RUNS_EACH; r++) {
    say(`single process, run ${r} of ${RUNS_EACH}: plain TF.js loop (wasm)`);
    const single = await singleProcessTimeToTarget(FASHION_DIR, TARGET_ACCURACY, say);
    say(`single process, run ${r}: ${single.seconds.toFixed(1)} s (${single.steps} steps)`);
    singles.push(single);
  }
  const singleSeconds = median(singles.map((s) => s.seconds));
  const singleDetail =
    `one process: ${listed(singles.map((s) => s.seconds))} s, ${listed(
      singles.map((s) => s.steps),
      0,
    )} steps, ` + `${Math.round(median(singles.map((s) => (s.steps * BATCH_SIZE) / s.seconds)))} samples/s`;
  const out = mkdtempSync(join(tmpdir(), 'tributary-bench-out-'));
  const cluster = await startBenchCluster({ trainers: TRAINERS, pservers: 2, evaluators: 1 }, say);
  try {
    await warmUp(cluster, out, say);
    const results: BenchResult[] = [];
    for (const run of RUNS) {
      // Evaluated every as many versions as hold the single process's cadence in examples, never
      // less often than it (a run evaluated less often would spend less on evaluating).
      const everySteps = Math.max(1, Math.floor(EVALUATE_EVERY_EXAMPLES / run.examplesPerVersion));
      const summaries: JobSummary[] = [];
      for (let r = 1; r <= RUNS_EACH; r++) {
        const id = `bench-tta-${run.id}-${r}`;
        const example = exampleJob(id, out);
        await submit(cluster.nc, {
          ...example,
          training: exampleTraining(run.training),
          evaluation: { ...(example['evaluation'] as Record<string, unknown>), everySteps },
        });
        say(`cluster, ${run.label}, run ${r} of ${RUNS_EACH}: job submitted; waiting for the evaluator to stop it`);
        const summary = await waitForSummary(out, id, JOB_TIMEOUT_MS);
        if (summary.stopReason !== 'target')
          throw new Error(`the cluster's ${run.label} job stopped by ${summary.stopReason}, not its target`);
        say(`cluster, ${run.label}, run ${r}: ${summary.wallSeconds.toFixed(1)} s (${summary.steps} steps)`);
        summaries.push(summary);
      }
      results.push(
        benchResult({
          name: `tta: time to 0.85, 2 trainers + 2 pservers (${run.label}) vs one process`,
          figure: round(median(summaries.map((s) => s.wallSeconds)), 2),
          unit: 's',
          baseline: round(singleSeconds, 2),
          target: TARGET_RATIO,
          lowerIsBetter: true,
          detail:
            `medians of ${RUNS_EACH} runs; cluster: ${listed(summaries.map((s) => s.wallSeconds))} s, ` +
            `${listed(
              summaries.map((s) => s.steps),
              0,
            )} steps, evaluated every ${everySteps}, ` +
            `${Math.round(median(summaries.map((s) => s.samplesPerSecond)))} samples/s; ${singleDetail}`,
        }),
      );
    }
    return results;
  } finally {
    await cluster.stop();
    rmSync(out, { recursive: true, force: true });
  }
}

/**
 * One job of the example to its target, not counted: a fresh cluster's first job runs on services
 * whose code is not yet optimised (its samples/s were about half of later jobs' here), so
 * without it the first row measured would pay for that, whichever it is. The single process has
 * a warm-up run of its own.
 */
async function warmUp(cluster: BenchCluster, out: string, say: (line: string) => void): Promise<void> {
  const id = 'bench-tta-warm-up';
  say('cluster, warm-up run (not counted): the example to its target');
  await submit(cluster.nc, exampleJob(id, out));
  await waitForSummary(out, id, JOB_TIMEOUT_MS);
}

/** `values` in run order, with `digits` decimals: `3.1, 3.7, 2.9`. */
function listed(values: readonly number[], digits = 1): string {
  return values.map((v) => v.toFixed(digits)).join(', ');
}
