import { Inject, Injectable, Logger } from '@nestjs/common';
import type { CommonConfig } from '#libs/config';
import { JobChannels } from './job-channels.js';
import { JobDriver, queueOptions } from './job-driver.js';
import type { StoredJob } from './job-store.js';
import type { LeaderDuty } from './leader-duty.js';
import { NO_LEASE_TOKEN } from './leadership.js';
import type { MasterConfig } from './master-config.js';
import { MASTER_SETTINGS } from './master-tokens.js';
import { TaskQueue } from './task-queue.js';

/**
 * The jobs this master drives, by id. On taking office it rebuilds every job from Redis, so a
 * new leader resumes each running job where the last one left it (pending tasks get fresh
 * deadlines), and finishes announcing a stop the last leader persisted but did not announce.
 */
@Injectable()
export class JobRoster implements LeaderDuty {
  private readonly logger = new Logger('JobRoster');
  private drivers = new Map<string, JobDriver>();
  private fence = NO_LEASE_TOKEN;
  /** Told of each task counted done in any job, with its duration in milliseconds. */
  onTaskDone?: (jobId: string, durationMs: number) => void;

  constructor(
    @Inject(JobChannels) private readonly channels: JobChannels,
    @Inject(MASTER_SETTINGS) private readonly settings: CommonConfig & MasterConfig,
  ) {}

  async takeOffice(fence: string): Promise<void> {
    this.fence = fence;
    const lastTerm = this.drivers;
    this.drivers = new Map();
    this.channels.openRecords();
    const { jobs, errors } = await this.channels.store.loadAll();
    for (const err of errors) this.logger.error(`${err.message}; the job is left out`);
    for (const loaded of jobs) {
      const job = await this.newest(loaded, lastTerm.get(loaded.queue.jobId));
      const driver = this.launch(job);
      if (!driver.running) {
        await this.finishStop(driver).catch((err: Error) =>
          this.logger.warn(`job ${driver.jobId}: announcing its stop failed: ${err.message}`),
        );
        continue;
      }
      // The last leader may have died between persisting a job and announcing it: announce it again.
      await this.channels.ensureTrainerConsumer(driver.jobId);
      await driver.publishRecord();
      const c = driver.epochTasks();
      const next = driver.nextEpochTasks();
      const ahead = next === undefined ? '' : `; epoch ${job.queue.epoch + 1} open: ${next.done} done`;
      this.logger.log(
        `resumed job ${driver.jobId} at epoch ${job.queue.epoch} (${c.done} done, ${c.pending} pending, ${c.todo} todo${ahead})`,
      );
    }
  }

  /**
   * Waits for every job's operation in flight. The drivers stay until the next term replaces
   * them: a handler still finishing looks its job up and fails at the fence, rather than
   * taking the job for unknown. Jobs-bucket writes not landed yet are dropped at once.
   */
  async leaveOffice(): Promise<void> {
    this.channels.closeRecords();
    await Promise.all([...this.drivers.values()].map((r) => r.settled()));
  }

  /** The driver of a job, if this master knows the job. */
  get(jobId: string): JobDriver | undefined {
    return this.drivers.get(jobId);
  }

  /** Every job still running. */
  running(): JobDriver[] {
    return [...this.drivers.values()].filter((r) => r.running);
  }

  /** Every job this master knows, running or stopped. */
  all(): JobDriver[] {
    return [...this.drivers.values()];
  }

  /** Stops knowing a job's run (its records were removed after the retention period). */
  forget(driver: JobDriver): void {
    if (this.drivers.get(driver.jobId) === driver) this.drivers.delete(driver.jobId);
  }

  /**
   * Persists a new job (fenced) and starts driving it.
   * @throws FencedWriteError when this master no longer leads.
   */
  async add(job: StoredJob): Promise<JobDriver> {
    const writes = await this.channels.create(job, this.fence);
    return this.launch({ ...job, writes });
  }

  /**
   * The newer of a job as Redis holds it and as this master's last term left it. When that term
   * wrote the job last and Redis holds fewer of its writes, Redis came back from a crash without
   * writes it had answered (the lease lapsed during the outage, so this is a new term): the
   * last term's state, which trainers acted on, is written back and resumed.
   */
  private async newest(stored: StoredJob, last: JobDriver | undefined): Promise<StoredJob> {
    if (last === undefined || last.runId !== stored.queue.runId) return stored;
    const mine = last.stored();
    if (stored.writer !== mine.writer || (stored.writes ?? 0) >= mine.writes) return stored;
    this.logger.warn(
      `job ${stored.queue.jobId}: Redis holds ${stored.writes ?? 0} writes of it, this master's last term answered ${mine.writes}: Redis lost writes it had answered; resuming from this master's memory`,
    );
    const writes = await this.channels.rewrite(mine, this.fence);
    return { ...mine, writes, writer: this.fence };
  }

  /**
   * The driver of a job already stored in Redis: this term's driver of that incarnation, or a
   * new one driving it (e.g. when the store applied the job's creation but its reply was lost).
   */
  adopt(job: StoredJob): JobDriver {
    const known = this.drivers.get(job.queue.jobId);
    if (known !== undefined && known.runId === job.queue.runId) return known;
    return this.launch(job);
  }

  /** Starts driving a stored job (replacing the driver of an earlier job of the same id). */
  private launch(job: StoredJob): JobDriver {
    const options = queueOptions(job.spec, this.settings);
    const queue = TaskQueue.restore(job.queue, options);
    const driver = new JobDriver(
      job.spec,
      job.plan,
      queue,
      this.channels,
      options,
      this.fence,
      job.submitSeq,
      job.writes ?? 0,
    );
    driver.onTaskDone = (durationMs) => this.onTaskDone?.(driver.jobId, durationMs);
    this.drivers.set(driver.jobId, driver);
    return driver;
  }

  /** A stop persisted by a leader that died before announcing it: purge, record and event. */
  private async finishStop(driver: JobDriver): Promise<void> {
    const { state, reason, detail } = driver.status();
    if ((await this.channels.recordState(driver.jobId)) === state) return;
    await this.channels.purgeTasks(driver.jobId);
    await driver.publishRecord();
    if (state === 'failed') {
      this.logger.log(`job ${driver.jobId}: announcing the failure the last leader persisted`);
      this.channels.publishEvent({ type: 'failed', jobId: driver.jobId, error: detail ?? 'failed' });
      return;
    }
    this.logger.log(`job ${driver.jobId}: announcing the stop (${reason}) the last leader persisted`);
    this.channels.publishEvent({
      type: 'stopped',
      jobId: driver.jobId,
      reason: reason ?? 'manual',
      ...(detail !== undefined ? { detail } : {}),
    });
  }
}
