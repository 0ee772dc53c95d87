import { Inject, Injectable, Logger } from '@nestjs/common';
import type { Subscription } from '@nats-io/transport-node';
import { SUBJECTS, decodeJsonObject, type EvaluationMetrics, type NatsConnection } from '#libs/messaging';
import { NATS_CONNECTION } from '#libs/service-runtime';
import { JobChannels } from './job-channels.js';
import { JobRoster } from './job-roster.js';
import type { LeaderDuty } from './leader-duty.js';
import { serveRequests, type Responder } from './request-handling.js';
import { jobIdFromSubject } from './trainer-requests.js';

/**
 * While the master leads, answers `tributary.jobs.*.status` with the job's state and counters,
 * and follows the jobs' events to include the evaluator's last metrics.
 */
@Injectable()
export class StatusResponder implements LeaderDuty {
  private readonly logger = new Logger('StatusResponder');
  private responder: Responder | undefined;
  private events: Subscription | undefined;

  constructor(
    @Inject(NATS_CONNECTION) private readonly nc: NatsConnection,
    @Inject(JobRoster) private readonly roster: JobRoster,
    @Inject(JobChannels) private readonly channels: JobChannels,
  ) {}

  async takeOffice(): Promise<void> {
    this.unsubscribe();
    this.responder = serveRequests(
      this.nc,
      SUBJECTS.allStatus,
      this.logger,
      () => this.channels.holdsLease(),
      async (msg) => {
        const jobId = jobIdFromSubject(msg.subject);
        return this.roster.get(jobId)?.status() ?? { error: `unknown job ${jobId}` };
      },
    );
    this.events = this.nc.subscribe(SUBJECTS.allEvents, {
      callback: (err, msg) => {
        if (err) return;
        try {
          const event = decodeJsonObject(msg.subject, msg.data);
          if (event['type'] !== 'metrics') return;
          const driver = this.roster.get(jobIdFromSubject(msg.subject));
          const metrics = event['metrics'];
          if (driver && metrics !== null && typeof metrics === 'object')
            driver.lastMetrics = metrics as EvaluationMetrics;
        } catch (error) {
          this.logger.warn(`ignoring an event: ${(error as Error).message}`);
        }
      },
    });
  }

  async leaveOffice(): Promise<void> {
    this.unsubscribe();
  }

  private unsubscribe(): void {
    this.responder?.stop();
    this.events?.unsubscribe();
    this.responder = undefined;
    this.events = undefined;
  }
}
