import { Inject, Injectable, Logger } from '@nestjs/common';
import { MalformedMessageError, SUBJECTS, type NatsConnection } from '#libs/messaging';
import { NATS_CONNECTION } from '#libs/service-runtime';
import { JobChannels } from './job-channels.js';
import { JobRoster } from './job-roster.js';
import type { LeaderDuty } from './leader-duty.js';
import { serveRequests, type Responder } from './request-handling.js';
import { parseJobFault, parseTaskClaim, parseTaskReport } from './trainer-requests.js';

/**
 * Answers trainers' claims and reports (`tributary.jobs.*.tasks.claim` / `.report`) and the
 * fault reports of trainers and the evaluator (`tributary.jobs.*.faults`) while the master leads.
 */
@Injectable()
export class TaskExchange implements LeaderDuty {
  private readonly logger = new Logger('TaskExchange');
  private responders: Responder[] = [];

  constructor(
    @Inject(NATS_CONNECTION) private readonly nc: NatsConnection,
    @Inject(JobRoster) private readonly roster: JobRoster,
    @Inject(JobChannels) private readonly channels: JobChannels,
  ) {}

  async takeOffice(): Promise<void> {
    this.stopResponders();
    const leading = () => this.channels.holdsLease();
    this.responders = [
      serveRequests(this.nc, SUBJECTS.allTaskClaims, this.logger, leading, async (msg) => {
        const claim = parseTaskClaim(msg.subject, msg.data);
        return this.driver(msg.subject, claim.jobId).claim(claim);
      }),
      serveRequests(this.nc, SUBJECTS.allTaskReports, this.logger, leading, async (msg) => {
        const report = parseTaskReport(msg.subject, msg.data);
        return this.driver(msg.subject, report.jobId).report(report);
      }),
      serveRequests(this.nc, SUBJECTS.allJobFaults, this.logger, leading, async (msg) => {
        const fault = parseJobFault(msg.subject, msg.data);
        const driver = this.driver(msg.subject, fault.jobId);
        // A report on an earlier run of the id says nothing about this one.
        if (driver.status().startedAt !== fault.startedAt) return { ok: true, counted: false };
        this.logger.warn(`job ${fault.jobId}: ${fault.source} could not set it up: ${fault.error}`);
        return { ok: true, counted: await driver.fault(fault.source, fault.error) };
      }),
    ];
  }

  async leaveOffice(): Promise<void> {
    this.stopResponders();
  }

  private stopResponders(): void {
    for (const r of this.responders) r.stop();
    this.responders = [];
  }

  private driver(subject: string, jobId: string) {
    const driver = this.roster.get(jobId);
    if (driver === undefined) throw new MalformedMessageError(subject, `unknown job ${jobId}`);
    return driver;
  }
}
