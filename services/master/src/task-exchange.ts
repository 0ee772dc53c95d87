import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { MalformedMessageError, SUBJECTS, type NatsConnection } from '#libs/messaging';
import { NATS_CONNECTION } from '#libs/service-runtime';
import { JobDirectory } from './job-directory.js';
import { serveRequests, type Responder } from './request-handling.js';
import { parseTaskClaim, parseTaskReport } from './trainer-requests.js';

/** Answers trainers' claims and reports (`tributary.jobs.*.tasks.claim` / `.report`). */
@Injectable()
export class TaskExchange implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('TaskExchange');
  private responders: Responder[] = [];

  constructor(
    @Inject(NATS_CONNECTION) private readonly nc: NatsConnection,
    @Inject(JobDirectory) private readonly directory: JobDirectory,
  ) {}

  onApplicationBootstrap(): void {
    this.responders = [
      serveRequests(this.nc, SUBJECTS.allTaskClaims, this.logger, async (msg) => {
        const claim = parseTaskClaim(msg.subject, msg.data);
        return this.runner(msg.subject, claim.jobId).claim(claim);
      }),
      serveRequests(this.nc, SUBJECTS.allTaskReports, this.logger, async (msg) => {
        const report = parseTaskReport(msg.subject, msg.data);
        return this.runner(msg.subject, report.jobId).report(report);
      }),
    ];
  }

  async onModuleDestroy(): Promise<void> {
    await Promise.all(this.responders.map((r) => r.stop()));
  }

  private runner(subject: string, jobId: string) {
    const runner = this.directory.get(jobId);
    if (runner === undefined) throw new MalformedMessageError(subject, `unknown job ${jobId}`);
    return runner;
  }
}
