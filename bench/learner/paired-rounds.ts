/**
 * Times the learner step (`train` + `getUpdate`, as in `train-step`) of each workload on the
 * current backend one way against another, in one process, in pairs of short rounds that take
 * turns going first. The ratio is the median of the pairs' ratios (this machine's speed drifts
 * within a minute more than the differences these compare), the figures the medians of the
 * rounds.
 */
import type { KernelConfig } from '@tensorflow/tfjs';
import * as tf from '@tensorflow/tfjs';
import type { TfjsLearner } from '#libs/learner';
import { benchResult, median, round, type BenchResult } from '../bench-result.js';
import { pairedTurns } from '../paired-turns.js';
import { measure, WORKLOADS } from './train-step.js';

const ROUND_SECONDS = 0.6;
const PAIRS = 16;

/** One of the two ways compared: its short label in progress lines, and how a round takes it. */
export interface PairedWay {
  label: string;
  /** Called before each of its rounds. */
  use?: () => void;
  /** Called on each round's learner before its first step. */
  prepare?: (learner: TfjsLearner) => void;
}

/** What {@link comparePairedRounds} compares and how its results are named. */
export interface PairedWays {
  /** Ours: the figure. */
  ours: PairedWay;
  /** The other: the baseline. */
  baseline: PairedWay;
  /** The result's name for a workload, e.g. `clone: <label> on wasm, ...`. */
  resultName(workloadLabel: string): string;
  target: number;
}

export async function comparePairedRounds(compared: PairedWays, say: (line: string) => void): Promise<BenchResult[]> {
  const { ours, baseline } = compared;
  const results: BenchResult[] = [];
  for (const workload of WORKLOADS) {
    const timed = (way: PairedWay) => async (): Promise<number> => {
      way.use?.();
      return (await measure(workload, ROUND_SECONDS, { prepare: way.prepare })).samplesPerSecond;
    };
    const rounds = await pairedTurns(PAIRS, { ours: timed(ours), baseline: timed(baseline) }, (pair, o, b) =>
      say(
        `${workload.label}, pair ${pair + 1}: ${baseline.label} ${Math.round(b)}, ${ours.label} ${Math.round(o)} samples/s`,
      ),
    );
    const { ratios } = rounds;
    results.push(
      benchResult({
        name: compared.resultName(workload.label),
        figure: round(median(rounds.ours)),
        unit: 'samples/s',
        baseline: round(median(rounds.baseline)),
        ratio: rounds.ratio,
        target: compared.target,
        detail:
          `ratio = median of ${PAIRS} paired rounds of ${ROUND_SECONDS} s ` +
          `(pairs from ${Math.min(...ratios).toFixed(2)} to ${Math.max(...ratios).toFixed(2)}); figures = medians of the rounds`,
      }),
    );
  }
  return results;
}

/** Registers `config` for its backend in place of what is registered for its kernel name. */
export function useKernel(config: KernelConfig): void {
  tf.unregisterKernel(config.kernelName, config.backendName);
  tf.registerKernel(config);
}

/**
 * {@link comparePairedRounds} of the wasm backend with one kernel against another for the same
 * kernel name; the kernel registered at the start is put back at the end.
 */
export async function comparePairedKernels(
  compared: Omit<PairedWays, 'ours' | 'baseline'> & {
    kernelName: string;
    ours: { label: string; config: KernelConfig };
    baseline: { label: string; config: KernelConfig };
  },
  say: (line: string) => void,
): Promise<BenchResult[]> {
  const registered = tf.getKernel(compared.kernelName, 'wasm');
  if (registered === undefined) throw new Error(`no ${compared.kernelName} kernel is registered for wasm`);
  const way = ({ label, config }: { label: string; config: KernelConfig }): PairedWay => ({
    label,
    use: () => useKernel(config),
  });
  try {
    return await comparePairedRounds({ ...compared, ours: way(compared.ours), baseline: way(compared.baseline) }, say);
  } finally {
    useKernel(registered);
  }
}
