import { Inject, Injectable, Logger } from '@nestjs/common';
import type { JetStreamManager, JsMsg } from '@nats-io/jetstream';
import { CONSUMERS, STREAMS } from '#libs/messaging';
import { DurablePull } from './durable-pull.js';
import { JobRoster } from './job-roster.js';
import type { LeaderDuty } from './leader-duty.js';
import { JETSTREAM_MANAGER } from './master-tokens.js';
import { parseStopRequest } from './stop-request.js';
import { jobIdFromSubject } from './trainer-requests.js';

/**
 * Takes stop requests from the control stream (durable `master-control`) and stops the job:
 * persisted as stopped with the reason, task messages purged, directory entry and `stopped`
 * event. The first stop wins; later ones for a stopped job are acked and ignored. Only the
 * leader takes stop messages.
 */
@Injectable()
export class StopControl implements LeaderDuty {
  private readonly logger = new Logger('StopControl');
  private readonly pull: DurablePull;

  constructor(
    @Inject(JETSTREAM_MANAGER) jsm: JetStreamManager,
    @Inject(JobRoster) private readonly roster: JobRoster,
  ) {
    this.pull = new DurablePull(jsm, STREAMS.control.name, CONSUMERS.masterControl, this.logger);
  }

  async takeOffice(): Promise<void> {
    await this.pull.start((msg) => this.handle(msg));
  }

  async leaveOffice(): Promise<void> {
    await this.pull.stop();
  }

  private async handle(msg: JsMsg): Promise<void> {
    let jobId: string;
    try {
      jobId = jobIdFromSubject(msg.subject);
    } catch (err) {
      this.logger.warn(`ignoring a stop message: ${(err as Error).message}`);
      msg.ack();
      return;
    }
    const request = parseStopRequest(msg.data);
    if (request.detail?.startsWith('stop body was not'))
      this.logger.warn(`stop message on ${msg.subject}: ${request.detail}`);
    const driver = this.roster.get(jobId);
    if (driver === undefined) {
      this.logger.warn(`stop message on ${msg.subject} for unknown job ${jobId}; ignored`);
    } else if (!(await driver.stop(request.reason, request.detail))) {
      this.logger.log(`job ${jobId} already stopped; stop (${request.reason}) ignored`);
    }
    msg.ack();
  }
}
