import { Inject, Injectable, Logger } from '@nestjs/common';
import type { Subscription } from '@nats-io/transport-node';
import {
  SUBJECTS,
  decodeJsonObject,
  type EvaluationMetrics,
  type JobListReply,
  type NatsConnection,
} from '#libs/messaging';
import { NATS_CONNECTION } from '#libs/service-runtime';
import { JobChannels } from './job-channels.js';
import { JobRoster } from './job-roster.js';
import type { LeaderDuty } from './leader-duty.js';
import { serveRequests, type Responder } from './request-handling.js';
import { jobIdFromSubject } from './trainer-requests.js';

/**
 * While the master leads, answers `tributary.jobs.*.status` with the job's state and counters
 * and `tributary.jobs.list` with every job it knows (running ones only unless asked for
 * `{all: true}`), and follows the jobs' events to include the evaluator's last metrics.
 */
@Injectable()
export class StatusResponder implements LeaderDuty {
  private readonly logger = new Logger('StatusResponder');
  private responder: Responder | undefined;
  private lister: Responder | undefined;
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
    this.lister = serveRequests(
      this.nc,
      SUBJECTS.list,
      this.logger,
      () => this.channels.holdsLease(),
      async (msg) => this.list(msg.data.length > 0 && decodeJsonObject(msg.subject, msg.data)['all'] === true),
    );
    this.events = this.nc.subscribe(SUBJECTS.allEvents, {
      callback: (err, msg) => {
        if (err) return;
        try {
          const event = decodeJsonObject(msg.subject, msg.data);
          if (event['type'] !== 'metrics') return;
          const driver = this.roster.get(jobIdFromSubject(msg.subject));
          const metrics = event['metrics'];
          if (driver === undefined) return;
          if (metrics !== null && typeof metrics === 'object') driver.lastMetrics = metrics as EvaluationMetrics;
          if (typeof event['best'] === 'number') driver.best = event['best'];
        } catch (error) {
          this.logger.warn(`ignoring an event: ${(error as Error).message}`);
        }
      },
    });
  }

  async leaveOffice(): Promise<void> {
    this.unsubscribe();
  }

  /** The jobs list: running jobs first, then the most recently started. */
  private list(all: boolean): JobListReply {
    const jobs = this.roster
      .all()
      .filter((driver) => all || driver.running)
      .map((driver) => driver.listEntry())
      .sort(
        (a, b) =>
          Number(b.state !== 'stopped') - Number(a.state !== 'stopped') || b.startedAt.localeCompare(a.startedAt),
      );
    return { jobs };
  }

  private unsubscribe(): void {
    this.responder?.stop();
    this.lister?.stop();
    this.events?.unsubscribe();
    this.responder = undefined;
    this.lister = undefined;
    this.events = undefined;
  }
}
