import type { KV, KvWatchEntry, KvWatchOptions } from '@nats-io/kv';
import { errors } from '@nats-io/transport-node';
import type { LineLogger } from '#libs/logging';
import { retryWithBackoff } from '#libs/retry';

/** First delay before a watch that ended by itself is opened again; it doubles up to the max. */
export const WATCH_REOPEN_MIN_MS = 250;
/** Longest delay between attempts to open a watch again. */
export const WATCH_REOPEN_MAX_MS = 5_000;

/** A live watch of a bucket: iterate it for entries, `stop()` to end it. */
export interface BucketWatch extends AsyncIterable<KvWatchEntry> {
  stop(): void;
}

/** Options of {@link watchBucket}. */
export interface BucketWatchOptions {
  /** Keys to watch (a NATS subject filter); all by default. */
  key?: string;
  /** Names the watch in log lines; the key filter by default. */
  name?: string;
  /** Told when the watch ended by itself and is opened again. */
  logger?: LineLogger;
}

/**
 * Watches a bucket like `kv.watch()` (the current value of each key, then every change), but
 * survives the end of the underlying watch: when the client library ends it (a server restart,
 * a consumer that could not be re-created), it is opened again from the revision after the last
 * one delivered, with backoff, until `stop()` or until the connection is closed. Entries come in
 * revision order and none is delivered twice.
 * @throws whatever `kv.watch()` throws when the first watch cannot be opened.
 */
export async function watchBucket(kv: KV, options: BucketWatchOptions = {}): Promise<BucketWatch> {
  const base: KvWatchOptions = options.key === undefined ? {} : { key: options.key };
  const name = options.name ?? `watch of ${options.key ?? 'every key'}`;
  const stopping = new AbortController();
  let current: Awaited<ReturnType<KV['watch']>> | undefined = await kv.watch(base);
  let lastRevision = 0;

  function reopen(): Promise<boolean> {
    return retryWithBackoff(
      async () => {
        if (stopping.signal.aborted) return false;
        try {
          const resume = lastRevision > 0 ? { resumeFromRevision: lastRevision + 1 } : {};
          current = await kv.watch({ ...base, ...resume });
        } catch (err) {
          if (err instanceof errors.ClosedConnectionError) return false;
          throw err;
        }
        if (stopping.signal.aborted) {
          current.stop();
          return false;
        }
        options.logger?.log(`${name} opened again after revision ${lastRevision}`);
        return true;
      },
      {
        initialDelayMs: WATCH_REOPEN_MIN_MS,
        maxDelayMs: WATCH_REOPEN_MAX_MS,
        signal: stopping.signal,
        pauseFirst: true,
        shouldRetry: (err) => {
          options.logger?.warn(`${name}: opening it again failed (${(err as Error).message}); retrying`);
          return true;
        },
      },
    );
  }

  async function* entries(): AsyncGenerator<KvWatchEntry> {
    while (current !== undefined) {
      for await (const entry of current) {
        if (entry.revision <= lastRevision) continue;
        lastRevision = entry.revision;
        yield entry;
      }
      current = undefined;
      if (stopping.signal.aborted) return;
      options.logger?.warn(`${name} ended by itself; opening it again`);
      if (!(await reopen())) return;
    }
  }

  const generator = entries();
  return {
    [Symbol.asyncIterator]: () => generator,
    stop() {
      stopping.abort();
      current?.stop();
    },
  };
}
