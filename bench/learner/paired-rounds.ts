/**
 * Times the learner step (`train` + `getUpdate`, as in `train-step`) of each workload on the
 * wasm backend with one registered kernel against another for the same kernel name, in one
 * process, in pairs of short rounds that take turns going first. The ratio is the median of the
 * pairs' ratios (this machine's speed drifts within a minute more than the differences these
 * compare), the figures the medians of the rounds. The kernel registered at the start is put
 * back at the end.
 */
import * as tf from '@tensorflow/tfjs';
import type { KernelConfig } from '@tensorflow/tfjs';
import { benchResult, median, round, type BenchResult } from '../bench-result.js';
import { measure, WORKLOADS } from './train-step.js';

const ROUND_SECONDS = 0.6;
const PAIRS = 16;

/** One of the two kernels compared, and its short label in progress lines. */
export interface KernelChoice {
  label: string;
  config: KernelConfig;
}

/** What {@link comparePairedKernels} compares and how its results are named. */
export interface PairedKernels {
  kernelName: string;
  /** Ours: the figure. */
  ours: KernelChoice;
  /** The other: the baseline. */
  baseline: KernelChoice;
  /** The result's name for a workload, e.g. `clone: <label> on wasm, ...`. */
  resultName(workloadLabel: string): string;
  target: number;
}

function use(config: KernelConfig): void {
  tf.unregisterKernel(config.kernelName, config.backendName);
  tf.registerKernel(config);
}

export async function comparePairedKernels(
  compared: PairedKernels,
  say: (line: string) => void,
): Promise<BenchResult[]> {
  const { kernelName, ours, baseline } = compared;
  const registered = tf.getKernel(kernelName, 'wasm');
  if (registered === undefined) throw new Error(`no ${kernelName} kernel is registered for wasm`);
  const results: BenchResult[] = [];
  try {
    for (const workload of WORKLOADS) {
      const rounds = { ours: [] as number[], baseline: [] as number[] };
      for (let pair = 0; pair < PAIRS; pair++) {
        const order = [
          ['baseline', baseline.config],
          ['ours', ours.config],
        ] as const;
        for (const [path, config] of pair % 2 === 0 ? order : [...order].reverse()) {
          use(config);
          rounds[path].push((await measure(workload, ROUND_SECONDS)).samplesPerSecond);
        }
        say(
          `${workload.label}, pair ${pair + 1}: ${baseline.label} ${Math.round(rounds.baseline[pair]!)}, ` +
            `${ours.label} ${Math.round(rounds.ours[pair]!)} samples/s`,
        );
      }
      const ratios = rounds.ours.map((value, i) => value / rounds.baseline[i]!);
      results.push(
        benchResult({
          name: compared.resultName(workload.label),
          figure: round(median(rounds.ours)),
          unit: 'samples/s',
          baseline: round(median(rounds.baseline)),
          ratio: median(ratios),
          target: compared.target,
          detail:
            `ratio = median of ${PAIRS} paired rounds of ${ROUND_SECONDS} s ` +
            `(pairs from ${Math.min(...ratios).toFixed(2)} to ${Math.max(...ratios).toFixed(2)}); figures = medians of the rounds`,
        }),
      );
    }
  } finally {
    use(registered);
  }
  return results;
}
