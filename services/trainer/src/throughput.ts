/** Slices a window is counted in: a sample leaves the window at most 1/50 of it early. */
const SLICES_PER_WINDOW = 50;

/**
 * Samples per second over a sliding time window. Samples are counted in slices of the window
 * (each dated by its first sample), so counting one costs the same however many the window
 * holds: it is called once per minibatch.
 */
export class ThroughputMeter {
  /** The slices that had samples, oldest first. */
  private readonly slices: { at: number; samples: number }[] = [];
  /** Samples in {@link slices}. */
  private total = 0;
  private readonly sliceMs: number;

  constructor(
    private readonly windowMs: number,
    private readonly now: () => number = Date.now,
  ) {
    this.sliceMs = windowMs / SLICES_PER_WINDOW;
  }

  /** Records `samples` processed now. */
  add(samples: number): void {
    const now = this.now();
    const last = this.slices.at(-1);
    if (last !== undefined && now - last.at < this.sliceMs) last.samples += samples;
    else this.slices.push({ at: now, samples });
    this.total += samples;
    this.prune(now);
  }

  /**
   * Samples per second over the window (0 when nothing was recorded in it), from its oldest
   * slice on: a trainer that started 3 s ago is measured over 3 s (over 1 s at least).
   */
  rate(): number {
    const now = this.now();
    this.prune(now);
    if (this.slices.length === 0) return 0;
    const span = Math.max(1, now - this.slices[0]!.at);
    return (this.total * 1000) / Math.max(span, Math.min(this.windowMs, 1000));
  }

  private prune(now: number): void {
    const cutoff = now - this.windowMs;
    while (this.slices.length > 0 && this.slices[0]!.at < cutoff) this.total -= this.slices.shift()!.samples;
  }
}
