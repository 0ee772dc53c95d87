import { performance } from 'node:perf_hooks';

/**
 * Where a shard's step time goes, summed until `take` returns means per step:
 * - `barrier`: from the first push of a version to the step (synchronous mode: the time the
 *   quorum took to complete; 0 in asynchronous mode);
 * - `update`: the optimizer update itself.
 */
export class StepTiming {
  private barrierMs = 0;
  private updateMs = 0;
  private steps = 0;
  private openedAt: number | undefined;

  /** `onStep`, when given, receives each step's barrier and update milliseconds as it ends. */
  constructor(
    private readonly now: () => number = () => performance.now(),
    private readonly onStep?: (barrierMs: number, updateMs: number) => void,
  ) {}

  /** The first push of the open version arrived. */
  opened(): void {
    this.openedAt ??= this.now();
  }

  /** Runs one update and counts a step; the barrier closes when it starts. */
  update<T>(fn: () => T): T {
    const start = this.now();
    const barrierMs = this.openedAt === undefined ? 0 : start - this.openedAt;
    this.barrierMs += barrierMs;
    this.openedAt = undefined;
    try {
      return fn();
    } finally {
      const updateMs = this.now() - start;
      this.updateMs += updateMs;
      this.steps += 1;
      this.onStep?.(barrierMs, updateMs);
    }
  }

  /** Mean milliseconds per step since the last call (undefined when no step was taken). */
  take(): { barrier: number; update: number; steps: number } | undefined {
    if (this.steps === 0) return undefined;
    const result = {
      barrier: Math.round((this.barrierMs / this.steps) * 100) / 100,
      update: Math.round((this.updateMs / this.steps) * 100) / 100,
      steps: this.steps,
    };
    this.barrierMs = 0;
    this.updateMs = 0;
    this.steps = 0;
    return result;
  }
}
