import { Inject, Injectable } from '@nestjs/common';
import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import {
  STREAMS,
  SUBJECTS,
  encodeJson,
  ensureTrainerConsumer,
  publishEvent,
  type Buckets,
  type JobEventInput,
  type JobRecord,
  type NatsConnection,
  type TaskMessage,
} from '#libs/messaging';
import { BUCKETS, NATS_CONNECTION } from '#libs/service-runtime';
import { JobStore } from './job-store.js';
import { JETSTREAM_MANAGER } from './master-tokens.js';
import type { QueueChange } from './task-queue.js';

/**
 * Where a job's changes go out: Redis (one atomic write per transition, fenced by `fence`
 * when set), the events subject, the tasks stream and the jobs bucket.
 */
@Injectable()
export class JobChannels {
  /** The leader's fencing token; every Redis write is refused unless it is current. Unset: unfenced. */
  fence: string | undefined;
  private readonly js: JetStreamClient;

  constructor(
    @Inject(NATS_CONNECTION) private readonly nc: NatsConnection,
    @Inject(BUCKETS) private readonly buckets: Buckets,
    @Inject(JETSTREAM_MANAGER) private readonly jsm: JetStreamManager,
    @Inject(JobStore) readonly store: JobStore,
  ) {
    this.js = jsm.jetstream();
  }

  /** Persists one transition of a job's queue. */
  persist(jobId: string, change: QueueChange): Promise<void> {
    return this.store.applyTransition(jobId, change, this.fence);
  }

  /** Publishes a lifecycle event (fire and forget; the events stream keeps it). */
  publishEvent(event: JobEventInput): void {
    publishEvent(this.nc, event);
  }

  /** Publishes a task on the job's tasks subject; the dispatch id doubles as the dedup id. */
  async publishTask(task: TaskMessage): Promise<void> {
    await this.js.publish(SUBJECTS.tasks(task.jobId), encodeJson(task), { msgID: task.dispatchId });
  }

  /** Writes the job's entry in the jobs bucket. */
  async putRecord(record: JobRecord): Promise<void> {
    await this.buckets.jobs.put(record.jobId, encodeJson(record));
  }

  /** Drops every task message of the job still waiting in the tasks stream. */
  async purgeTasks(jobId: string): Promise<void> {
    await this.jsm.streams.purge(STREAMS.tasks.name, { filter: SUBJECTS.tasks(jobId) });
  }

  /** Creates (if missing) the pull consumer the job's trainers share. */
  ensureTrainerConsumer(jobId: string): Promise<void> {
    return ensureTrainerConsumer(this.jsm, jobId, SUBJECTS.tasks(jobId));
  }
}
