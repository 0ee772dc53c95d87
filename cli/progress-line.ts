import type { Writable } from 'node:stream';

/** Shortest time between two redraws of a progress line on a terminal. */
const PROGRESS_REDRAW_INTERVAL_MS = 100;

function formatProgress(label: string, done: number, total: number): string {
  const percent = total === 0 ? 100 : Math.floor((done / total) * 100);
  return `${label}: ${done.toLocaleString('en-US')}/${total.toLocaleString('en-US')} records (${percent}%)`;
}

/**
 * Shows a task's progress. On a terminal, one line is redrawn in place as records are done;
 * elsewhere (a pipe, a log file) only the final count is written, as a plain line.
 */
export class ProgressLine {
  private lastDrawMs = 0;
  private drawn = false;

  constructor(
    private readonly stream: Writable & { isTTY?: boolean },
    private readonly label: string,
  ) {}

  /** Records `done` out of `total`; finishes the line when `done` reaches `total`. */
  update(done: number, total: number): void {
    if (done >= total) {
      this.finish(done, total);
      return;
    }
    if (this.stream.isTTY !== true) return;
    const now = Date.now();
    if (now - this.lastDrawMs < PROGRESS_REDRAW_INTERVAL_MS) return;
    this.lastDrawMs = now;
    this.stream.write(`\r\x1b[K${formatProgress(this.label, done, total)}`);
    this.drawn = true;
  }

  private finish(done: number, total: number): void {
    const prefix = this.stream.isTTY === true && this.drawn ? '\r\x1b[K' : '';
    this.stream.write(`${prefix}${formatProgress(this.label, done, total)}\n`);
    this.drawn = false;
  }
}
