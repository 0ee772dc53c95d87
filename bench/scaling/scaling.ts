/**
 * `scaling`: samples/s of 2 trainers against 1 trainer on the example MLP job (its `local`
 * rounds, one pserver, no evaluator), each measured over a steady window on a fresh local
 * cluster, 1 trainer before and after 2 and the faster taken; then the same in `sync` mode.
 * Beside it, the machine's own ceiling: the learner alone in one process against two such
 * processes at once (cores that share caches or a physical core do not give two learners twice
 * one's rate).
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { SERVICE_NODE_FLAGS } from '#libs/local-cluster';
import { benchResult, round, type BenchResult } from '../bench-result.js';
import {
  ROOT,
  exampleJob,
  exampleTraining,
  formatPhases,
  startBenchCluster,
  steadyThroughput,
  submit,
} from '../cluster/bench-cluster.js';

const WINDOW_MS = 20_000;
const WARM_UP_MS = 8_000;
const TARGET_RATIO = 1.6;

/** The runs compared: the example as it is, then `sync`. */
const RUNS = [
  {
    id: 'example',
    label: ` (the example: local, ${String(exampleTraining({})['localSteps'])} steps a round)`,
    training: {},
  },
  { id: 'sync', label: ', sync', training: { mode: 'sync' } },
] as const;

async function throughput(
  trainers: number,
  run: (typeof RUNS)[number],
  say: (line: string) => void,
): Promise<{ rate: number; reported: number; phases: string }> {
  const out = mkdtempSync(join(tmpdir(), 'tributary-bench-out-'));
  const cluster = await startBenchCluster({ trainers, pservers: 1, evaluators: 0 }, say);
  try {
    const example = exampleJob(`bench-scaling-${run.id}-${trainers}`, out, {
      pservers: { count: 1 },
      stop: { maxSeconds: 600 },
    });
    await submit(cluster.nc, {
      ...example,
      training: exampleTraining(run.training),
    });
    const steady = await steadyThroughput(cluster.nc, { trainers, warmUpMs: WARM_UP_MS, windowMs: WINDOW_MS, say });
    return {
      rate: steady.samplesPerSecond,
      reported: steady.reportedSamplesPerSecond,
      phases: formatPhases(steady.trainerPhases),
    };
  } finally {
    await cluster.stop();
    rmSync(out, { recursive: true, force: true });
  }
}

/** How long each learner process of the ceiling trains. */
const CEILING_SECONDS = 10;

/** Samples/s of `processes` learners training alone at once, summed. */
async function learnersAtOnce(processes: number): Promise<number> {
  const script = join(ROOT, 'dist', 'bench', 'scaling', 'learner-process.js');
  const runs = Array.from({ length: processes }, () =>
    promisify(execFile)(process.execPath, [...SERVICE_NODE_FLAGS, script, String(CEILING_SECONDS)]),
  );
  const rates = (await Promise.all(runs)).map(
    ({ stdout }) => (JSON.parse(stdout.trim().split('\n').at(-1)!) as { samplesPerSecond: number }).samplesPerSecond,
  );
  return rates.reduce((a, b) => a + b, 0);
}

export async function runScalingBench(say: (line: string) => void): Promise<BenchResult[]> {
  say('the learner alone: one process, then two at once');
  const alone = await learnersAtOnce(1);
  const pair = await learnersAtOnce(2);
  say(`the learner alone: ${Math.round(alone)} samples/s; two at once: ${Math.round(pair)} samples/s`);
  const ceiling =
    `this machine's ceiling: two learners alone at once ${Math.round(pair)} vs one ${Math.round(alone)} samples/s ` +
    `= ${(pair / alone).toFixed(2)}x`;
  const results: BenchResult[] = [];
  for (const run of RUNS) {
    // One trainer before and after two, the faster taken: the machine's speed drifts within
    // minutes, and a slow moment under the one-trainer run would lift the ratio.
    const before = await throughput(1, run, say);
    say(`1 trainer${run.label}: ${Math.round(before.rate)} samples/s`);
    const two = await throughput(2, run, say);
    say(`2 trainers${run.label}: ${Math.round(two.rate)} samples/s`);
    const after = await throughput(1, run, say);
    say(`1 trainer${run.label}, again: ${Math.round(after.rate)} samples/s`);
    const one = after.rate > before.rate ? after : before;
    results.push(
      benchResult({
        name: `scaling: 2 trainers vs 1${run.label} (${availableParallelism()} cores)`,
        figure: round(two.rate),
        unit: 'samples/s',
        baseline: round(one.rate),
        target: TARGET_RATIO,
        detail:
          `${ceiling}; 1 trainer ${Math.round(before.rate)} samples/s before 2, ${Math.round(after.rate)} after ` +
          `(the faster is the baseline); as the trainers report it: 1 trainer ${Math.round(one.reported)}, ` +
          `2 trainers ${Math.round(two.reported)} samples/s; ` +
          `1 trainer ms/step: ${one.phases}; 2 trainers ms/step: ${two.phases}`,
      }),
    );
  }
  return results;
}
