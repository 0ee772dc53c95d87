/**
 * `tta`: time to 0.85 test accuracy of the example MLP job on a local cluster of 2 trainers and
 * 2 pservers (with master and evaluator, everything as `npm run demo` runs it) against the
 * single-process loop of `single-process.ts`, both on this machine in this run. The cluster's
 * time is the job's own wall time in its summary (from its start to the evaluator's stop), the
 * loop's from its first step; neither counts start-up or loading.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { benchResult, round, type BenchResult } from '../bench-result.js';
import { FASHION_DIR, exampleJob, startBenchCluster, submit, waitForSummary } from '../cluster/bench-cluster.js';
import { singleProcessTimeToTarget } from './single-process.js';

const TARGET_ACCURACY = 0.85;
/** Target: the cluster reaches the accuracy in at most this share of the loop's time. */
const TARGET_RATIO = 0.8;
const JOB_TIMEOUT_MS = 600_000;

export async function runTtaBench(say: (line: string) => void): Promise<BenchResult[]> {
  say('single process: plain TF.js loop (wasm)');
  const single = await singleProcessTimeToTarget(FASHION_DIR, TARGET_ACCURACY, say);
  say(`single process: ${single.seconds.toFixed(1)} s (${single.steps} steps)`);
  const out = mkdtempSync(join(tmpdir(), 'tributary-bench-out-'));
  const cluster = await startBenchCluster({ trainers: 2, pservers: 2, evaluators: 1 }, say);
  try {
    await submit(cluster.nc, exampleJob('bench-tta', out));
    say('cluster: job submitted; waiting for the evaluator to stop it');
    const summary = await waitForSummary(out, 'bench-tta', JOB_TIMEOUT_MS);
    if (summary.stopReason !== 'target')
      throw new Error(`the cluster's job stopped by ${summary.stopReason}, not its target`);
    say(`cluster: ${summary.wallSeconds.toFixed(1)} s (${summary.steps} steps)`);
    return [
      benchResult({
        name: 'tta: time to 0.85, 2 trainers + 2 pservers vs one process',
        figure: round(summary.wallSeconds),
        unit: 's',
        baseline: round(single.seconds),
        target: TARGET_RATIO,
        lowerIsBetter: true,
        detail:
          `cluster: ${summary.steps} steps, best ${summary.bestValue}, ${Math.round(summary.samplesPerSecond)} samples/s; ` +
          `one process: ${single.steps} steps, ${single.accuracy.toFixed(4)}`,
      }),
    ];
  } finally {
    await cluster.stop();
    rmSync(out, { recursive: true, force: true });
  }
}
