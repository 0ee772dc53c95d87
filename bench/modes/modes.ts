/**
 * `modes`: the example Fashion-MNIST MLP job trained for the same number of epochs in every
 * training mode (and with float16 transfer), one job after another on one local cluster of 2
 * trainers and 2 pservers. Each mode's figure is the test accuracy of the model the job exported
 * (its best evaluation), against `sync`'s in the same run; the target is to stay within one
 * point of it. Wall time per job is in the detail.
 * Every mode keeps the example's Adam 0.001 (in `local` mode each trainer runs it on its own
 * copy).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { JobSummary } from '#libs/messaging';
import { benchResult, round, type BenchResult } from '../bench-result.js';
import {
  exampleJob,
  exampleTraining,
  startBenchCluster,
  submit,
  waitForSummary,
  type BenchCluster,
} from '../cluster/bench-cluster.js';

/** Passes over the training data every job makes. */
const EPOCHS = 2;
/** Points of test accuracy a mode may lose against `sync`. */
const MAX_POINTS_BELOW_SYNC = 1;
const JOB_TIMEOUT_MS = 600_000;

/** One job of the benchmark: a name and what it changes in the example's spec. */
interface ModeRun {
  name: string;
  training: Record<string, unknown>;
  transfer?: Record<string, unknown>;
  trainers?: Record<string, unknown>;
}

const RUNS: readonly ModeRun[] = [
  { name: 'sync', training: { mode: 'sync' } },
  { name: 'sync, 1 backup trainer', training: { mode: 'sync', backupTrainers: 1 }, trainers: { min: 2, max: 8 } },
  { name: 'sync, float16 transfer', training: { mode: 'sync' }, transfer: { dtype: 'float16', params: 'float16' } },
  { name: 'async', training: { mode: 'async' } },
  { name: 'async, staleness-aware', training: { mode: 'async', stalenessAware: true } },
  { name: 'async, pushes overlapped', training: { mode: 'async', overlapPushes: true } },
  { name: 'ssp, maxStaleness 2', training: { mode: 'ssp', maxStaleness: 2 } },
  { name: 'local, 4 steps', training: { mode: 'local', localSteps: 4 } },
  { name: 'local, 4 steps, overlapped', training: { mode: 'local', localSteps: 4, overlapRounds: true } },
  { name: 'local, elastic 0.5', training: { mode: 'local', localSteps: 4, localSync: false, elasticAlpha: 0.5 } },
];

async function trainFor(
  cluster: BenchCluster,
  out: string,
  run: ModeRun,
  index: number,
  say: (line: string) => void,
): Promise<JobSummary> {
  const id = `bench-modes-${index}`;
  const example = exampleJob(id, out);
  const spec = {
    ...example,
    training: exampleTraining(run.training),
    ...(run.transfer ? { transfer: run.transfer } : {}),
    ...(run.trainers ? { trainers: run.trainers } : {}),
    stop: { maxEpochs: EPOCHS, maxSeconds: JOB_TIMEOUT_MS / 1000 },
  };
  say(`${run.name}: submitted (${EPOCHS} epochs)`);
  await submit(cluster.nc, spec);
  const summary = await waitForSummary(out, id, JOB_TIMEOUT_MS);
  say(
    `${run.name}: accuracy ${summary.bestValue} in ${summary.wallSeconds.toFixed(1)} s ` +
      `(${summary.steps} steps, stopped by ${summary.stopReason})`,
  );
  return summary;
}

export async function runModesBench(say: (line: string) => void): Promise<BenchResult[]> {
  const out = mkdtempSync(join(tmpdir(), 'tributary-bench-out-'));
  const cluster = await startBenchCluster({ trainers: 2, pservers: 2, evaluators: 1 }, say);
  try {
    const summaries: JobSummary[] = [];
    for (const [i, run] of RUNS.entries()) summaries.push(await trainFor(cluster, out, run, i, say));
    const points = (s: JobSummary) => 100 * (s.bestValue ?? 0);
    const sync = summaries[0]!;
    return RUNS.map((run, i) => {
      const s = summaries[i]!;
      return benchResult({
        name: `modes: ${run.name}, test accuracy after ${EPOCHS} epochs vs sync (ratio: points of difference)`,
        figure: round(points(s), 2),
        unit: '%',
        baseline: round(points(sync), 2),
        ratio: round(points(s) - points(sync), 2),
        target: -MAX_POINTS_BELOW_SYNC,
        detail: `${s.wallSeconds.toFixed(1)} s wall, ${s.steps} steps, ${Math.round(s.samplesPerSecond)} samples/s, stopped by ${s.stopReason}`,
      });
    });
  } finally {
    await cluster.stop();
    rmSync(out, { recursive: true, force: true });
  }
}
