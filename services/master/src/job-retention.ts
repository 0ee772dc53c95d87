import { Inject, Injectable, Logger } from '@nestjs/common';
import type { CommonConfig } from '#libs/config';
import { JobChannels } from './job-channels.js';
import { JobRoster } from './job-roster.js';
import type { LeaderDuty } from './leader-duty.js';
import type { MasterConfig } from './master-config.js';
import { MASTER_SETTINGS } from './master-tokens.js';

/** The retention sweep runs at most this often, and at least every quarter of the retention. */
export const RETENTION_SWEEP_MAX_MS = 60_000;
const RETENTION_SWEEP_MIN_MS = 100;

/**
 * While the master leads, removes each job that stopped more than `JOB_RETENTION_HOURS` ago:
 * its jobs-bucket entry, stream messages and Redis state (see `JobChannels.removeJob`). The job's
 * output directory is never touched.
 */
@Injectable()
export class JobRetention implements LeaderDuty {
  private readonly logger = new Logger('JobRetention');
  private readonly retentionMs: number;
  private timer: NodeJS.Timeout | undefined;
  private sweeping: Promise<void> = Promise.resolve();
  private fence = '';

  constructor(
    @Inject(JobRoster) private readonly roster: JobRoster,
    @Inject(JobChannels) private readonly channels: JobChannels,
    @Inject(MASTER_SETTINGS) settings: CommonConfig & MasterConfig,
  ) {
    this.retentionMs = settings.retentionHours * 3_600_000;
  }

  async takeOffice(fence: string): Promise<void> {
    this.fence = fence;
    const every = Math.max(RETENTION_SWEEP_MIN_MS, Math.min(RETENTION_SWEEP_MAX_MS, this.retentionMs / 4));
    clearInterval(this.timer);
    this.timer = setInterval(() => {
      this.sweeping = this.sweeping.then(() => this.sweep());
    }, every);
    this.timer.unref();
  }

  async leaveOffice(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.sweeping;
  }

  /** Removes every job whose retention has run out; a failure is logged and tried again next time. */
  private async sweep(): Promise<void> {
    const now = Date.now();
    for (const driver of this.roster.all()) {
      const stoppedAt = driver.stoppedAtMs;
      if (driver.running || stoppedAt === undefined || now - stoppedAt < this.retentionMs) continue;
      if (this.timer === undefined) return;
      try {
        await this.channels.removeJob(driver.jobId, driver.runId, this.fence);
        this.roster.forget(driver);
        this.logger.log(
          `job ${driver.jobId}: stopped ${new Date(stoppedAt).toISOString()}, past its retention; records removed ` +
            `(output ${driver.spec.output} kept)`,
        );
      } catch (err) {
        this.logger.warn(`job ${driver.jobId}: removing its records failed (${(err as Error).message}); will retry`);
      }
    }
  }
}
