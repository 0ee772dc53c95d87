import type { KV } from '@nats-io/kv';
import type { LineLogger } from '#libs/logging';
import { MalformedMessageError, decodeJsonObject, watchBucket, type JobRecord } from '#libs/messaging';

/** One change of the jobs bucket. */
export interface JobChange {
  jobId: string;
  /** The job's record, or null when its entry was deleted or purged. */
  record: JobRecord | null;
  /** True for the values present when the watch started, false for later updates. */
  initial: boolean;
  /** The bucket revision of the change. */
  revision: number;
}

/** A live watch of the jobs bucket: iterate it for changes, `stop()` to end it. */
export interface JobWatch extends AsyncIterable<JobChange> {
  stop(): void;
}

const JOB_STATES = new Set(['running', 'waiting', 'stopped', 'failed']);

/** Checks the fields of a `JobRecord` read from the jobs bucket under `key`. */
export function parseJobRecord(key: string, data: Uint8Array): JobRecord {
  const where = `jobs bucket key ${key}`;
  const obj = decodeJsonObject(where, data);
  if (typeof obj['jobId'] !== 'string') throw new MalformedMessageError(where, 'jobId: expected a string');
  if (typeof obj['state'] !== 'string' || !JOB_STATES.has(obj['state'])) {
    throw new MalformedMessageError(where, `state: expected one of ${[...JOB_STATES].join(', ')}`);
  }
  if (typeof obj['epoch'] !== 'number') throw new MalformedMessageError(where, 'epoch: expected a number');
  return obj as unknown as JobRecord;
}

/**
 * Watches every key of the jobs bucket: the current values first (`initial`), then each change
 * as it happens. Entries that are not a valid `JobRecord` are logged and skipped.
 */
export async function watchJobRecords(jobs: KV, logger: LineLogger): Promise<JobWatch> {
  // The watcher's own isUpdate flag marks the last current value as an update, so the
  // bucket's last revision before the watch starts tells current values from changes.
  const lastRevision = (await jobs.status()).streamInfo.state.last_seq;
  // A watch the client library ends (a server restart) is opened again where it stopped.
  const iter = await watchBucket(jobs, { name: 'watch of the jobs bucket', logger });
  async function* changes(): AsyncGenerator<JobChange> {
    for await (const entry of iter) {
      const base = { jobId: entry.key, initial: entry.revision <= lastRevision, revision: entry.revision };
      if (entry.operation !== 'PUT') {
        yield { ...base, record: null };
        continue;
      }
      try {
        yield { ...base, record: parseJobRecord(entry.key, entry.value) };
      } catch (err) {
        logger.warn(`skipping job record: ${(err as Error).message}`);
      }
    }
  }
  const generator = changes();
  return {
    [Symbol.asyncIterator]: () => generator,
    stop: () => iter.stop(),
  };
}
