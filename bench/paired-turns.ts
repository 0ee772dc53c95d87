/**
 * Two ways of doing the same work timed in pairs that take turns going first (the baseline first
 * in even pairs), so that the machine's drift falls on both alike: the benchmarks that compare
 * within one process or one job (`paired-rounds`, `age`, `overhead`'s slices) all pair this way.
 */
import { median } from './bench-result.js';

/** Each pair's figures, their ratios (ours over the baseline) and the median ratio. */
export interface PairedTurns {
  ours: number[];
  baseline: number[];
  ratios: number[];
  ratio: number;
}

/**
 * Runs `baseline` and `ours` `pairs` times each, in turns; `onPair` sees each pair once both
 * figures are in (its index, ours, the baseline).
 */
export async function pairedTurns(
  pairs: number,
  ways: { ours: () => Promise<number>; baseline: () => Promise<number> },
  onPair?: (pair: number, ours: number, baseline: number) => void,
): Promise<PairedTurns> {
  const ours: number[] = [];
  const baseline: number[] = [];
  for (let pair = 0; pair < pairs; pair++) {
    if (pair % 2 === 0) {
      baseline.push(await ways.baseline());
      ours.push(await ways.ours());
    } else {
      ours.push(await ways.ours());
      baseline.push(await ways.baseline());
    }
    onPair?.(pair, ours[pair]!, baseline[pair]!);
  }
  const ratios = ours.map((value, i) => value / baseline[i]!);
  return { ours, baseline, ratios, ratio: median(ratios) };
}
