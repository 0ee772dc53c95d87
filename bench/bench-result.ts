import { availableParallelism, cpus } from 'node:os';

/**
 * One figure of a benchmark, as `npm run bench -- --json FILE` writes it: what was measured
 * (`figure`, in `unit`), the baseline measured in the same run, their ratio, the target the ratio
 * is held to, and whether it was met.
 */
export interface BenchResult {
  name: string;
  figure: number;
  unit: string;
  baseline: number;
  ratio: number;
  target: number;
  met: boolean;
  /** True when a lower ratio is better (a time); the target is then a most, else a least. */
  lowerIsBetter?: boolean;
  /** Anything more the benchmark has to say (a breakdown, the setup), for the printed table. */
  detail?: string;
}

/** A result from a figure and its baseline; `ratio` is figure / baseline. */
export function benchResult(fields: Omit<BenchResult, 'ratio' | 'met'> & { ratio?: number }): BenchResult {
  const ratio = fields.ratio ?? fields.figure / fields.baseline;
  const met = fields.lowerIsBetter ? ratio <= fields.target : ratio >= fields.target;
  return { ...fields, ratio: round(ratio, 3), met };
}

/** The machine a run measured, for `--json`. */
export function machine(): { cores: number; cpu: string; node: string } {
  return { cores: availableParallelism(), cpu: cpus()[0]?.model ?? 'unknown', node: process.version };
}

/** `value` rounded to `digits` decimals. */
export function round(value: number, digits = 1): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

/** The median of `values` (the mean of the middle two for an even count); NaN when empty. */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}
