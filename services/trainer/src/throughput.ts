/** Samples per second over a sliding time window. */
export class ThroughputMeter {
  private readonly events: { at: number; samples: number }[] = [];

  constructor(
    private readonly windowMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Records `samples` processed now. */
  add(samples: number): void {
    this.events.push({ at: this.now(), samples });
    this.prune();
  }

  /** Samples per second over the window (0 when nothing was recorded in it). */
  rate(): number {
    this.prune();
    if (this.events.length === 0) return 0;
    const span = Math.max(1, this.now() - this.events[0]!.at);
    const total = this.events.reduce((n, e) => n + e.samples, 0);
    return (total * 1000) / Math.max(span, Math.min(this.windowMs, 1000));
  }

  private prune(): void {
    const cutoff = this.now() - this.windowMs;
    while (this.events.length > 0 && this.events[0]!.at < cutoff) this.events.shift();
  }
}
