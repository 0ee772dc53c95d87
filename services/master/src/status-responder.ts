import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import type { Subscription } from '@nats-io/transport-node';
import { SUBJECTS, decodeJsonObject, type EvaluationMetrics, type NatsConnection } from '#libs/messaging';
import { NATS_CONNECTION } from '#libs/service-runtime';
import { JobDirectory } from './job-directory.js';
import { serveRequests, type Responder } from './request-handling.js';
import { jobIdFromSubject } from './trainer-requests.js';

/**
 * Answers `tributary.jobs.*.status` with the job's state and counters, and follows the jobs'
 * events to include the evaluator's last metrics.
 */
@Injectable()
export class StatusResponder implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('StatusResponder');
  private responder: Responder | undefined;
  private events: Subscription | undefined;

  constructor(
    @Inject(NATS_CONNECTION) private readonly nc: NatsConnection,
    @Inject(JobDirectory) private readonly directory: JobDirectory,
  ) {}

  onApplicationBootstrap(): void {
    this.responder = serveRequests(this.nc, SUBJECTS.allStatus, this.logger, async (msg) => {
      const jobId = jobIdFromSubject(msg.subject);
      return this.directory.get(jobId)?.status() ?? { error: `unknown job ${jobId}` };
    });
    this.events = this.nc.subscribe(SUBJECTS.allEvents, {
      callback: (err, msg) => {
        if (err) return;
        try {
          const event = decodeJsonObject(msg.subject, msg.data);
          if (event['type'] !== 'metrics') return;
          const runner = this.directory.get(jobIdFromSubject(msg.subject));
          const metrics = event['metrics'];
          if (runner && metrics !== null && typeof metrics === 'object')
            runner.lastMetrics = metrics as EvaluationMetrics;
        } catch (error) {
          this.logger.warn(`ignoring an event: ${(error as Error).message}`);
        }
      },
    });
  }

  async onModuleDestroy(): Promise<void> {
    await this.responder?.stop();
    await this.events?.drain();
  }
}
