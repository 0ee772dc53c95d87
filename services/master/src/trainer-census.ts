import { Inject, Injectable, Logger } from '@nestjs/common';
import {
  KV_BUCKETS,
  MalformedMessageError,
  decodeJsonObject,
  listBucketKeys,
  numberField,
  stringField,
  type Buckets,
  type MemberStatus,
  type NatsConnection,
} from '#libs/messaging';
import { BUCKETS, NATS_CONNECTION } from '#libs/service-runtime';

/** Least time between two warnings about the same unreadable member entry. */
export const GARBAGE_MEMBER_WARN_INTERVAL_MS = 60_000;

/**
 * Reads a `trainer.*` entry of the members bucket as a trainer's `MemberStatus`.
 * @throws MalformedMessageError when it is not JSON, not a trainer's status, or lacks a field.
 */
export function parseTrainerStatus(key: string, data: Uint8Array): MemberStatus {
  const subject = `${KV_BUCKETS.members}.${key}`;
  const obj = decodeJsonObject(subject, data);
  if (obj['role'] !== 'trainer') throw new MalformedMessageError(subject, `role: expected "trainer"`);
  stringField(subject, obj, 'id');
  numberField(subject, obj, 'pid');
  stringField(subject, obj, 'host');
  stringField(subject, obj, 'state');
  stringField(subject, obj, 'at');
  return obj as unknown as MemberStatus;
}

/**
 * Counts live trainers: the `trainer.*` entries of the members bucket that read as a trainer's
 * status, which lapse by themselves when a trainer stops refreshing them. Unreadable entries
 * are left out, with a warning at most once a minute per key.
 */
@Injectable()
export class TrainerCensus {
  private readonly logger = new Logger('TrainerCensus');
  private live = 0;
  /** When each unreadable key was last warned about. */
  private readonly warned = new Map<string, number>();

  constructor(
    @Inject(NATS_CONNECTION) private readonly nc: NatsConnection,
    @Inject(BUCKETS) private readonly buckets: Buckets,
  ) {}

  /** The count from the last refresh. */
  count(): number {
    return this.live;
  }

  /** Recounts; on a failure the previous count stands. */
  async refresh(): Promise<number> {
    try {
      // Listed by request, not through a consumer: a count taken across a NATS restart answers
      // or fails within the request timeout, and the dispatch loop that waits for it goes on.
      const keys = await listBucketKeys(this.nc, KV_BUCKETS.members, 'trainer.*');
      let n = 0;
      for (const key of keys) {
        const entry = await this.buckets.members.get(key);
        // Gone since it was listed.
        if (entry === null || entry.operation !== 'PUT') continue;
        try {
          parseTrainerStatus(key, entry.value);
          n += 1;
        } catch (err) {
          if (!(err instanceof MalformedMessageError)) throw err;
          this.warnGarbage(key, err);
        }
      }
      this.live = n;
    } catch (err) {
      this.logger.warn(`counting trainers failed: ${(err as Error).message}`);
    }
    return this.live;
  }

  private warnGarbage(key: string, err: MalformedMessageError): void {
    const now = Date.now();
    const last = this.warned.get(key);
    if (last !== undefined && now - last < GARBAGE_MEMBER_WARN_INTERVAL_MS) return;
    this.warned.delete(key);
    this.warned.set(key, now);
    if (this.warned.size > 1000) this.warned.delete(this.warned.keys().next().value!);
    this.logger.warn(`${err.message}; not counted as a trainer`);
  }
}
