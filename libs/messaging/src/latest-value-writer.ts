import type { KV } from '@nats-io/kv';
import type { LineLogger } from '#libs/logging';

/** First delay before a failed write is tried again; it doubles up to the max. */
export const KV_WRITE_RETRY_MIN_MS = 250;
/** Longest delay between attempts of a failed write. */
export const KV_WRITE_RETRY_MAX_MS = 5_000;

/**
 * Writes the latest value of each key to a bucket, and keeps trying until it lands: a write
 * that fails (NATS down or restarting, JetStream not answering) is tried again with backoff, with
 * whatever value is the latest for its key by then. Writes of one key go out one at a time, in
 * order, so an older value never lands after a newer one.
 */
export class LatestValueWriter {
  private readonly latest = new Map<string, Uint8Array>();
  private readonly writing = new Set<string>();
  private readonly timers = new Set<NodeJS.Timeout>();
  /** Callers of `put` whose value was queued behind a write in flight. */
  private readonly waiters = new Map<string, { resolve: () => void; reject: (err: Error) => void }[]>();
  private closed = false;

  constructor(
    private readonly kv: KV,
    private readonly logger?: LineLogger,
  ) {}

  /**
   * Sets the value of `key`. Resolves once it (or a newer value of the key) is stored, or
   * rejects with the error of the first failed attempt; the writer keeps trying after that.
   */
  put(key: string, value: Uint8Array): Promise<void> {
    if (this.closed) return Promise.reject(new Error(`writer closed; ${key} not written`));
    this.latest.set(key, value);
    if (this.writing.has(key)) return this.settled(key);
    this.writing.add(key);
    return this.write(key, KV_WRITE_RETRY_MIN_MS);
  }

  /** Failed writes waiting for their next attempt. */
  retriesScheduled(): number {
    return this.timers.size;
  }

  /** Keys whose latest value is not stored yet. */
  pending(): string[] {
    return [...this.latest.keys()];
  }

  /**
   * Stops retrying: values not stored by now are dropped, and no attempt is made after this
   * returns (a write already on its way may still land). Returns the keys whose latest value was
   * dropped.
   */
  close(): string[] {
    this.closed = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    const dropped = [...this.latest.keys()];
    this.latest.clear();
    return dropped;
  }

  /** A promise for a value queued behind a write in flight. */
  private settled(key: string): Promise<void> {
    return new Promise((resolve, reject) => {
      const list = this.waiters.get(key) ?? [];
      list.push({ resolve, reject });
      this.waiters.set(key, list);
    });
  }

  private async write(key: string, delayMs: number): Promise<void> {
    const value = this.latest.get(key);
    if (value === undefined || this.closed) {
      this.writing.delete(key);
      return;
    }
    try {
      await this.kv.put(key, value);
    } catch (err) {
      const error = err as Error;
      this.logger?.warn(`writing ${key} failed (${error.message}); retrying`);
      this.retry(key, delayMs);
      for (const w of this.waiters.get(key) ?? []) w.reject(error);
      this.waiters.delete(key);
      throw error;
    }
    const waiting = this.waiters.get(key) ?? [];
    this.waiters.delete(key);
    if (this.latest.get(key) === value) {
      this.latest.delete(key);
      this.writing.delete(key);
      for (const w of waiting) w.resolve();
    } else {
      // A newer value came while this one was on its way: write it next.
      if (waiting.length > 0) this.waiters.set(key, waiting);
      void this.write(key, KV_WRITE_RETRY_MIN_MS).catch(() => undefined);
    }
  }

  private retry(key: string, delayMs: number): void {
    if (this.closed) return;
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      void this.write(key, Math.min(KV_WRITE_RETRY_MAX_MS, delayMs * 2)).catch(() => undefined);
    }, delayMs);
    timer.unref();
    this.timers.add(timer);
  }
}
