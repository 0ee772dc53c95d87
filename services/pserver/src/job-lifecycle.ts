import type { KV, KvWatchEntry } from '@nats-io/kv';
import {
  KV_BUCKETS,
  decodeJsonObject,
  listBucketKeys,
  watchBucket,
  type JobState,
  type NatsConnection,
} from '#libs/messaging';
import type { LineLogger } from '#libs/logging';
import type { ParameterShard } from './parameter-shard.js';

/** How long a stopped job's parameters stay in memory after its last checkpoint. */
export const STOPPED_JOB_RETENTION_MS = 60_000;

const LIVE_STATES: ReadonlySet<JobState> = new Set(['running', 'waiting']);

/** Settings of a `JobLifecycle`. */
export interface JobLifecycleOptions {
  /** Default `STOPPED_JOB_RETENTION_MS`. */
  retentionMs?: number;
  logger: LineLogger;
}

/**
 * Follows the jobs bucket for one shard: which jobs are live when the shard starts (they are
 * resumed from disk before it serves), and when a job stops or fails (checkpointed at once,
 * dropped from memory after `retentionMs`). A job of the same id that runs again is reinstated.
 * A job whose entry is removed (the master's `JOB_RETENTION_HOURS` ran out) loses its
 * checkpoints.
 */
export class JobLifecycle {
  private readonly retentionMs: number;
  private readonly drops = new Map<string, NodeJS.Timeout>();
  private stopWatch: () => void = () => undefined;

  constructor(
    private readonly nc: NatsConnection,
    private readonly jobs: KV,
    private readonly shard: ParameterShard,
    private readonly options: JobLifecycleOptions,
  ) {
    this.retentionMs = options.retentionMs ?? STOPPED_JOB_RETENTION_MS;
  }

  /**
   * Starts following changes, then reads the jobs that are live now. Entries that are not a
   * job record are skipped.
   */
  async start(): Promise<string[]> {
    // A watch the client library ends (a server restart) is opened again where it stopped.
    const watch = await watchBucket(this.jobs, {
      name: 'watch of the jobs bucket',
      logger: this.options.logger,
      updatesOnly: true,
    });
    this.stopWatch = () => watch.stop();
    void (async () => {
      for await (const entry of watch) this.onChange(entry);
    })().catch((err: Error) => this.options.logger.warn(`following the jobs bucket failed: ${err.message}`));
    const live: string[] = [];
    for (const key of await listBucketKeys(this.nc, KV_BUCKETS.jobs)) {
      const entry = await this.jobs.get(key);
      if (entry?.operation === 'PUT' && LIVE_STATES.has(this.stateOf(entry) as JobState)) live.push(key);
    }
    return live;
  }

  /** Stops following the bucket and cancels pending drops. */
  stop(): void {
    this.stopWatch();
    for (const t of this.drops.values()) clearTimeout(t);
    this.drops.clear();
  }

  private onChange(entry: KvWatchEntry): void {
    const jobId = entry.key;
    if (entry.operation !== 'PUT') {
      clearTimeout(this.drops.get(jobId));
      this.drops.delete(jobId);
      void this.shard
        .discard(jobId)
        .catch((err: Error) =>
          this.options.logger.warn(`job ${jobId}: removing its checkpoints failed: ${err.message}`),
        );
      return;
    }
    const state = this.stateOf(entry);
    if (state === undefined) return;
    if (LIVE_STATES.has(state as JobState)) {
      clearTimeout(this.drops.get(jobId));
      this.drops.delete(jobId);
      this.shard.reinstate(jobId);
      return;
    }
    if (this.drops.has(jobId) || !this.shard.jobIds().includes(jobId)) return;
    void this.shard.checkpointIfChanged(jobId);
    const timer = setTimeout(() => {
      this.drops.delete(jobId);
      void this.shard.retire(jobId);
    }, this.retentionMs);
    timer.unref();
    this.drops.set(jobId, timer);
  }

  private stateOf(entry: { key: string; value: Uint8Array }): string | undefined {
    try {
      const state = decodeJsonObject(`jobs bucket key ${entry.key}`, entry.value).state;
      return typeof state === 'string' ? state : undefined;
    } catch (err) {
      this.options.logger.warn(`skipping job record: ${(err as Error).message}`);
      return undefined;
    }
  }
}
