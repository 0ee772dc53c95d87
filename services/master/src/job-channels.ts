import { Inject, Injectable, Logger, type BeforeApplicationShutdown } from '@nestjs/common';
import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import {
  KV_BUCKETS,
  STREAMS,
  SUBJECTS,
  decodeJsonObject,
  encodeJson,
  ensureTrainerConsumer,
  JobEventPublisher,
  LatestValueWriter,
  type Buckets,
  type JobEventInput,
  type JobRecord,
  type TaskMessage,
} from '#libs/messaging';
import { BUCKETS } from '#libs/service-runtime';
import { FencedWriteError, NotInOfficeError } from './errors.js';
import { JobStore, type StoredJob } from './job-store.js';
import { Leadership } from './leadership.js';
import { JETSTREAM_MANAGER } from './master-tokens.js';
import type { QueueChange } from './task-queue.js';

/**
 * Where a job's changes go out: Redis (one atomic write per transition, fenced by the lease
 * token of the term that made it), the events stream (each event acknowledged, retried until it
 * is, in order), the tasks stream and the jobs bucket.
 * A write the fence refuses makes the master leave office at once. Jobs-bucket entries go
 * through one `LatestValueWriter` per term, which keeps trying a failed write (newest value per
 * job wins) until the term ends.
 */
@Injectable()
export class JobChannels implements BeforeApplicationShutdown {
  private readonly logger = new Logger('JobChannels');
  private readonly js: JetStreamClient;
  private readonly events: JobEventPublisher;
  /** The current term's writer of jobs-bucket entries; none between terms. */
  private records: LatestValueWriter | undefined;

  constructor(
    @Inject(BUCKETS) private readonly buckets: Buckets,
    @Inject(JETSTREAM_MANAGER) private readonly jsm: JetStreamManager,
    @Inject(JobStore) readonly store: JobStore,
    @Inject(Leadership) private readonly leadership: Leadership,
  ) {
    this.js = jsm.jetstream();
    this.events = new JobEventPublisher(this.js, this.logger);
  }

  /** Gives the events not stored yet (a job's `stopped`, say) a last chance before NATS closes. */
  async beforeApplicationShutdown(): Promise<void> {
    await this.events.drain();
  }

  /**
   * Persists one transition of a job's queue, fenced with `fence`, after the job's `writes`th
   * write. Resolves to the job's write count after it.
   * @throws FencedWriteError when `fence` is no longer the leader's token.
   * @throws LostWritesError when Redis does not hold `writes` writes of the job.
   */
  persist(jobId: string, change: QueueChange, fence: string, writes: number): Promise<number> {
    return this.fenced(this.store.applyTransition(jobId, change, fence, writes));
  }

  /**
   * Writes a new job, fenced with `fence`. Resolves to its write count.
   * @throws FencedWriteError when `fence` is no longer the leader's token.
   */
  create(job: StoredJob, fence: string): Promise<number> {
    return this.fenced(this.store.create(job, fence));
  }

  /**
   * Writes a job whole from memory over what Redis holds of it, fenced with `fence`. Resolves to
   * its write count.
   * @throws FencedWriteError when `fence` is no longer the leader's token.
   */
  rewrite(job: StoredJob & { writes: number }, fence: string): Promise<number> {
    return this.fenced(this.store.rewrite(job, fence));
  }

  /**
   * Publishes a lifecycle event. Returns at once: the event goes out after those before it, and
   * is tried again until the events stream stores it.
   */
  publishEvent(event: JobEventInput): void {
    this.events.publish(event);
  }

  /** Publishes a task on the job's tasks subject; the dispatch id doubles as the dedup id. */
  async publishTask(task: TaskMessage): Promise<void> {
    await this.js.publish(SUBJECTS.tasks(task.jobId), encodeJson(task), { msgID: task.dispatchId });
  }

  /** Starts a term: jobs-bucket entries are written (and retried) from now on. */
  openRecords(): void {
    this.records?.close();
    this.records = new LatestValueWriter(this.buckets.jobs, this.logger);
  }

  /**
   * Ends the term: jobs-bucket writes not landed yet are dropped, so they never overwrite the
   * entry of a newer leader. Returns the jobs whose entries were dropped.
   */
  closeRecords(): string[] {
    const dropped = this.records?.close() ?? [];
    this.records = undefined;
    if (dropped.length > 0) {
      this.logger.warn(`term ended before the jobs-bucket entries of ${dropped.join(', ')} landed; dropped them`);
    }
    return dropped;
  }

  /**
   * Writes the job's entry in the jobs bucket. Resolves once it (or a newer entry of the job)
   * is stored; rejects on the first failed attempt, while the write is still tried again until
   * it lands or the term ends.
   * @throws NotInOfficeError outside a term (`openRecords` … `closeRecords`).
   */
  putRecord(record: JobRecord): Promise<void> {
    if (this.records === undefined)
      return Promise.reject(new NotInOfficeError(`writing the entry of job ${record.jobId}`));
    return this.records.put(record.jobId, encodeJson(record));
  }

  /** The state in the job's jobs-bucket entry, or undefined when it has none (or it is unreadable). */
  async recordState(jobId: string): Promise<string | undefined> {
    const entry = await this.buckets.jobs.get(jobId);
    if (entry === null || entry.operation !== 'PUT') return undefined;
    try {
      const state = decodeJsonObject(`${KV_BUCKETS.jobs}.${jobId}`, entry.value)['state'];
      return typeof state === 'string' ? state : undefined;
    } catch {
      return undefined;
    }
  }

  /** Drops every task message of the job still waiting in the tasks stream. */
  async purgeTasks(jobId: string): Promise<void> {
    await this.jsm.streams.purge(STREAMS.tasks.name, { filter: SUBJECTS.tasks(jobId) });
  }

  /**
   * Removes what a finished job left behind: its jobs-bucket entry (pservers drop its
   * checkpoints when they see it go), its messages in every stream, and last its Redis state
   * (fenced, and only while run `runId` is the job's), so a removal cut short is done again on
   * the next sweep.
   * @throws FencedWriteError when `fence` is no longer the leader's token.
   */
  async removeJob(jobId: string, runId: string, fence: string): Promise<void> {
    // A run of the same id submitted since owns the job's entry and subjects now.
    if ((await this.store.load(jobId))?.queue.runId !== runId) return;
    await this.buckets.jobs.purge(jobId);
    const subjects: [string, string][] = [
      [STREAMS.events.name, SUBJECTS.events(jobId)],
      [STREAMS.snapshots.name, SUBJECTS.snapshots(jobId)],
      [STREAMS.tasks.name, SUBJECTS.tasks(jobId)],
      [STREAMS.control.name, SUBJECTS.stop(jobId)],
    ];
    for (const [stream, filter] of subjects) await this.jsm.streams.purge(stream, { filter });
    await this.fenced(this.store.remove(jobId, runId, fence).then(() => undefined));
  }

  /** Whether this master holds the leader lease right now (replies are sent only then). */
  holdsLease(): boolean {
    return this.leadership.holdsLease();
  }

  private async fenced<T>(write: Promise<T>): Promise<T> {
    try {
      return await write;
    } catch (err) {
      if (err instanceof FencedWriteError) this.leadership.fenced(err.fence);
      throw err;
    }
  }

  /** Creates (if missing) the pull consumer the job's trainers share. */
  ensureTrainerConsumer(jobId: string): Promise<void> {
    return ensureTrainerConsumer(this.jsm, jobId, SUBJECTS.tasks(jobId));
  }
}
