/**
 * `scaling`: samples/s of 2 trainers against 1 trainer on the example MLP job (sync SGD, one
 * pserver, no evaluator), each measured over a steady window on a fresh local cluster.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { benchResult, round, type BenchResult } from '../bench-result.js';
import { exampleJob, formatPhases, startBenchCluster, steadyThroughput, submit } from '../cluster/bench-cluster.js';

const WINDOW_MS = 20_000;
const WARM_UP_MS = 8_000;
const TARGET_RATIO = 1.6;

async function throughput(trainers: number, say: (line: string) => void): Promise<{ rate: number; phases: string }> {
  const out = mkdtempSync(join(tmpdir(), 'tributary-bench-out-'));
  const cluster = await startBenchCluster({ trainers, pservers: 1, evaluators: 0 }, say);
  try {
    await submit(
      cluster.nc,
      exampleJob(`bench-scaling-${trainers}`, out, { pservers: { count: 1 }, stop: { maxSeconds: 600 } }),
    );
    const steady = await steadyThroughput(cluster.nc, { trainers, warmUpMs: WARM_UP_MS, windowMs: WINDOW_MS, say });
    return { rate: steady.samplesPerSecond, phases: formatPhases(steady.trainerPhases) };
  } finally {
    await cluster.stop();
    rmSync(out, { recursive: true, force: true });
  }
}

export async function runScalingBench(say: (line: string) => void): Promise<BenchResult[]> {
  const one = await throughput(1, say);
  say(`1 trainer: ${Math.round(one.rate)} samples/s`);
  const two = await throughput(2, say);
  say(`2 trainers: ${Math.round(two.rate)} samples/s`);
  return [
    benchResult({
      name: `scaling: 2 trainers vs 1 (${availableParallelism()} cores)`,
      figure: round(two.rate),
      unit: 'samples/s',
      baseline: round(one.rate),
      target: TARGET_RATIO,
      detail: `1 trainer ms/step: ${one.phases}; 2 trainers ms/step: ${two.phases}`,
    }),
  ];
}
