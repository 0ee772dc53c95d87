import { Inject, Injectable, Logger } from '@nestjs/common';
import type { MasterConfig } from './master-config.js';
import { JobRoster } from './job-roster.js';
import type { LeaderDuty } from './leader-duty.js';
import { MASTER_SETTINGS } from './master-tokens.js';
import { TrainerCensus } from './trainer-census.js';

/**
 * Every `tickMs` while the master leads: count trainers, then let each running job expire
 * deadlines and refill its window.
 */
@Injectable()
export class DispatchLoop implements LeaderDuty {
  private readonly logger = new Logger('DispatchLoop');
  private timer: NodeJS.Timeout | undefined;
  private current: Promise<void> = Promise.resolve();
  private busy = false;

  constructor(
    @Inject(JobRoster) private readonly roster: JobRoster,
    @Inject(TrainerCensus) private readonly census: TrainerCensus,
    @Inject(MASTER_SETTINGS) private readonly settings: MasterConfig,
  ) {}

  async takeOffice(): Promise<void> {
    clearInterval(this.timer);
    this.timer = setInterval(() => this.tick(), this.settings.tickMs);
    this.tick();
  }

  async leaveOffice(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.current;
  }

  private tick(): void {
    if (this.busy) return;
    this.busy = true;
    this.current = (async () => {
      const trainers = await this.census.refresh();
      await Promise.all(
        this.roster
          .running()
          .map((driver) =>
            driver.tick(trainers).catch((err: Error) => this.logger.error(`job ${driver.jobId}: ${err.message}`)),
          ),
      );
    })().finally(() => {
      this.busy = false;
    });
  }
}
