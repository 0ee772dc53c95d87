import { Inject, Injectable, Logger } from '@nestjs/common';
import { NATS_LINK, type NatsLink } from '#libs/service-runtime';
import type { MasterConfig } from './master-config.js';
import { JobRoster } from './job-roster.js';
import type { JobDriver } from './job-driver.js';
import type { LeaderDuty } from './leader-duty.js';
import { MASTER_SETTINGS } from './master-tokens.js';
import { TrainerCensus } from './trainer-census.js';

/**
 * Dispatch-loop periods a pass waits for a fresh trainer count before it goes on with the last
 * one; the count in flight finishes in the background.
 */
export const CENSUS_WAIT_TICKS = 4;

/** A trainer count still unfinished after this long is reported (once per count). */
export const CENSUS_STUCK_WARN_MS = 30_000;

/**
 * Every `tickMs` while the master leads and reaches NATS: count trainers, then let each running job expire
 * deadlines and refill its window, with an equal share of the trainers when several run. Nothing slow holds the loop up: a trainer count that does
 * not come within {@link CENSUS_WAIT_TICKS} periods is replaced by the last one, and each job is
 * ticked on its own, so a job whose previous tick is still running is skipped without delaying
 * the others (a new job's first tasks go out whatever the rest of the cluster is doing).
 */
@Injectable()
export class DispatchLoop implements LeaderDuty {
  private readonly logger = new Logger('DispatchLoop');
  private timer: NodeJS.Timeout | undefined;
  /** The pass under way (the wait for a trainer count and the start of each job's tick). */
  private pass: Promise<void> | undefined;
  /** The trainer count in flight, if any; at most one at a time. */
  private counting: Promise<number> | undefined;
  /** Each job's tick in flight. */
  private readonly jobTicks = new Map<JobDriver, Promise<void>>();
  /** NATS reconnections already answered by re-arming the claims. */
  private reconnections = 0;
  /** Another pass is due as soon as the one under way ends (`dispatchNow` came during it). */
  private passAgain = false;

  constructor(
    @Inject(JobRoster) private readonly roster: JobRoster,
    @Inject(TrainerCensus) private readonly census: TrainerCensus,
    @Inject(MASTER_SETTINGS) private readonly settings: Pick<MasterConfig, 'tickMs'>,
    @Inject(NATS_LINK) private readonly contact: Pick<NatsLink, 'isConnected' | 'reconnections'>,
  ) {}

  async takeOffice(): Promise<void> {
    clearInterval(this.timer);
    this.timer = setInterval(() => this.tick(), this.settings.tickMs);
    this.tick();
  }

  async leaveOffice(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    this.passAgain = false;
    await this.pass;
    await Promise.all(this.jobTicks.values());
  }

  /**
   * A pass now rather than at the next period, for a job just started: its first tasks go out
   * at once, not up to a period (500 ms by default) later, when they are all its trainers wait
   * for. A pass under way is followed by another, since it may have listed the running jobs
   * before this one. Nothing happens out of office.
   */
  dispatchNow(): void {
    if (this.timer === undefined) return;
    if (this.pass !== undefined) this.passAgain = true;
    else this.tick();
  }

  private tick(): void {
    if (this.pass !== undefined) return;
    // Cut off from NATS, the master hears no renewal: no claim may lapse, and nothing can be
    // dispatched. Back, it gives every claim a fresh lease, which the renewals then keep.
    if (!this.contact.isConnected) return;
    if (this.contact.reconnections !== this.reconnections) {
      this.reconnections = this.contact.reconnections;
      for (const runner of this.roster.running()) {
        runner.rearmClaims().catch((err: Error) => this.logger.error(`job ${runner.jobId}: ${err.message}`));
      }
    }
    this.pass = (async () => {
      const trainers = await this.countTrainers();
      const running = this.roster.running();
      // Each running job gets an equal share of the trainers (rounded up, at least one).
      const share = running.length > 1 ? Math.max(1, Math.ceil(trainers / running.length)) : undefined;
      for (const runner of running) this.tickJob(runner, trainers, share);
    })().finally(() => {
      this.pass = undefined;
      if (this.passAgain && this.timer !== undefined) {
        this.passAgain = false;
        this.tick();
      }
    });
  }

  private tickJob(runner: JobDriver, trainers: number, share: number | undefined): void {
    if (this.jobTicks.has(runner)) return;
    const ticking = runner
      .tick(trainers, share)
      .catch((err: Error) => this.logger.error(`job ${runner.jobId}: ${err.message}`))
      .finally(() => this.jobTicks.delete(runner));
    this.jobTicks.set(runner, ticking);
  }

  /** A fresh trainer count if one comes in time, else the last one. */
  private async countTrainers(): Promise<number> {
    if (this.counting === undefined) {
      const startedAt = Date.now();
      const stuck = setTimeout(
        () =>
          this.logger.warn(
            `counting trainers has not finished after ${CENSUS_STUCK_WARN_MS} ms; dispatching with the last count (${this.census.count()})`,
          ),
        CENSUS_STUCK_WARN_MS,
      );
      stuck.unref();
      this.counting = this.census.refresh().finally(() => {
        clearTimeout(stuck);
        this.counting = undefined;
        if (Date.now() - startedAt > CENSUS_STUCK_WARN_MS) this.logger.log('counting trainers finished again');
      });
    }
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<number>((resolve) => {
      timer = setTimeout(() => resolve(this.census.count()), this.settings.tickMs * CENSUS_WAIT_TICKS);
    });
    try {
      return await Promise.race([this.counting, late]);
    } finally {
      clearTimeout(timer);
    }
  }
}
