import { KvWatchInclude, type KV, type KvWatchEntry, type KvWatchOptions } from '@nats-io/kv';
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
  /** Only changes made after the watch opened, not the current values. */
  updatesOnly?: boolean;
}

/**
 * Watches a bucket like `kv.watch()` (the current value of each key, then every change), but
 * survives the end of the underlying watch: when the client library ends it or it fails (a
 * server restart, a consumer that could not be re-created), it is opened again from the revision
 * after the last one delivered, with backoff, until `stop()` or until the connection is closed.
 * Entries come in revision order and none is delivered twice.
 * @throws whatever `kv.watch()` throws when the first watch cannot be opened.
 */
export async function watchBucket(kv: KV, options: BucketWatchOptions = {}): Promise<BucketWatch> {
  const base: KvWatchOptions = options.key === undefined ? {} : { key: options.key };
  const name = options.name ?? `watch of ${options.key ?? 'every key'}`;
  const stopping = new AbortController();
  // With updates only, a watch reopened before any change came resumes after the revision the
  // bucket had when it first opened, not from the current values.
  let lastRevision = options.updatesOnly ? (await kv.status()).streamInfo.state.last_seq : 0;
  let current: Awaited<ReturnType<KV['watch']>> | undefined = await kv.watch(
    options.updatesOnly ? { ...base, include: KvWatchInclude.UpdatesOnly } : base,
  );

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
      let ending = 'ended by itself';
      try {
        for await (const entry of current) {
          if (entry.revision <= lastRevision) continue;
          lastRevision = entry.revision;
          yield entry;
        }
      } catch (err) {
        ending = `failed (${(err as Error).message})`;
      }
      current = undefined;
      if (stopping.signal.aborted) return;
      options.logger?.warn(`${name} ${ending}; opening it again`);
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
