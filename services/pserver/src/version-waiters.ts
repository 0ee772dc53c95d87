import { ShardClosingError, WaitTimeoutError } from './errors.js';
import type { ShardParameters } from './shard-parameters.js';

interface Waiter {
  minVersion: number;
  resolve: () => void;
  reject: (err: Error) => void;
}

/**
 * The pulls of one job waiting for a version the shard has not reached yet. A step or the end
 * of initialisation calls `settle`, which wakes those whose version is now there; the others
 * time out on their own, are aborted by their caller, or are ended by `close`.
 */
export class VersionWaiters {
  private readonly waiters = new Set<Waiter>();
  private closed = false;

  constructor(
    private readonly jobId: string,
    private readonly shard: number,
    private readonly params: Pick<ShardParameters, 'version' | 'initialized'>,
  ) {}

  /**
   * Resolves once the parameters are initialised and at `minVersion` or later; rejects with
   * `WaitTimeoutError` after `waitMs` (at once for 0), or when `signal` aborts.
   */
  wait(minVersion: number, waitMs: number, signal?: AbortSignal): Promise<void> {
    if (this.closed) return Promise.reject(new ShardClosingError(this.shard));
    if (this.ready(minVersion)) return Promise.resolve();
    if (waitMs <= 0) {
      return Promise.reject(new WaitTimeoutError(this.jobId, minVersion, this.params.version, waitMs));
    }
    return new Promise((resolve, reject) => {
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        this.waiters.delete(waiter);
      };
      const waiter: Waiter = {
        minVersion,
        resolve: () => {
          done();
          resolve();
        },
        reject: (err) => {
          done();
          reject(err);
        },
      };
      const timer = setTimeout(
        () => waiter.reject(new WaitTimeoutError(this.jobId, minVersion, this.params.version, waitMs)),
        waitMs,
      );
      const onAbort = () => waiter.reject(signal?.reason instanceof Error ? signal.reason : new Error('aborted'));
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiters.add(waiter);
    });
  }

  /** True when a wait for `minVersion` would resolve at once: not closed, initialised and there. */
  ready(minVersion: number): boolean {
    return !this.closed && this.params.initialized && this.params.version >= minVersion;
  }

  /** Wakes the waits for a version that is now reached. */
  settle(): void {
    for (const w of [...this.waiters]) if (this.params.version >= w.minVersion) w.resolve();
  }

  /** Ends every wait with `ShardClosingError`; later waits fail at once. */
  close(): void {
    this.closed = true;
    for (const w of [...this.waiters]) w.reject(new ShardClosingError(this.shard));
  }
}
