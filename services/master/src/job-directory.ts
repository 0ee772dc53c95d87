import { Inject, Injectable, Logger, type BeforeApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import type { CommonConfig } from '#libs/config';
import { JobChannels } from './job-channels.js';
import { JobRunner, queueOptions } from './job-runner.js';
import type { StoredJob } from './job-store.js';
import type { MasterConfig } from './master-config.js';
import { MASTER_SETTINGS } from './master-tokens.js';
import { TaskQueue } from './task-queue.js';

/**
 * The jobs this master drives, by id. On start it rebuilds every job from Redis, so a restarted
 * master resumes each running job where it was (pending tasks get fresh deadlines).
 */
@Injectable()
export class JobDirectory implements OnModuleInit, BeforeApplicationShutdown {
  private readonly logger = new Logger('JobDirectory');
  private readonly runners = new Map<string, JobRunner>();

  constructor(
    @Inject(JobChannels) private readonly channels: JobChannels,
    @Inject(MASTER_SETTINGS) private readonly settings: CommonConfig & MasterConfig,
  ) {}

  async onModuleInit(): Promise<void> {
    const { jobs, errors } = await this.channels.store.loadAll();
    for (const err of errors) this.logger.error(`${err.message}; the job is left out`);
    for (const job of jobs) {
      const runner = this.launch(job);
      if (!runner.running) continue;
      // A crash may have come between persisting a job and announcing it: announce it again.
      await this.channels.ensureTrainerConsumer(runner.jobId);
      await runner.publishRecord();
      const c = runner.status().tasks;
      this.logger.log(
        `resumed job ${runner.jobId} at epoch ${job.queue.epoch} (${c.done} done, ${c.pending} pending, ${c.todo} todo)`,
      );
    }
  }

  /** Waits for every job's in-flight operation, so nothing is cut off when connections close. */
  async beforeApplicationShutdown(): Promise<void> {
    await Promise.all([...this.runners.values()].map((r) => r.idle()));
  }

  /** The runner of a job, if this master knows the job. */
  get(jobId: string): JobRunner | undefined {
    return this.runners.get(jobId);
  }

  /** Every job still running. */
  running(): JobRunner[] {
    return [...this.runners.values()].filter((r) => r.running);
  }

  /** Starts driving a stored job (replacing the runner of an earlier job of the same id). */
  launch(job: StoredJob): JobRunner {
    const options = queueOptions(job.spec, this.settings.durationWindow);
    const runner = new JobRunner(job.spec, job.plan, TaskQueue.restore(job.queue, options), this.channels, options);
    this.runners.set(runner.jobId, runner);
    return runner;
  }
}
