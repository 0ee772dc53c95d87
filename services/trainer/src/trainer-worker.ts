import { InvalidJobSpecError, validateJobSpec, type JobSpec } from '#libs/job-spec';
import type { LineLogger } from '#libs/logging';
import type { EventSubscription } from '#libs/master-client';
import type { JobRecord } from '#libs/messaging';
import { sleep } from '#libs/retry';
import { JOB_SETUP_RETRY_MS } from './defaults.js';
import { SERVED_JOB_STATES, type JobRecordsView } from './job-records-view.js';
import type { JobTrainer } from './job-trainer.js';

/** What a `TrainerWorker` needs. */
export interface TrainerWorkerDeps {
  jobRecords: JobRecordsView;
  jobTrainer: Pick<JobTrainer, 'run'>;
  /** Live events of a job, to hear `stopped` before the jobs bucket says so. */
  events?: (jobId: string) => EventSubscription;
  logger: LineLogger;
  /** Pause before a job whose set-up failed is tried again. */
  setupRetryMs?: number;
}

/** Identifies one run of a job id (a resubmitted job has a new `startedAt`). */
function runKey(record: JobRecord): string {
  return `${record.jobId}@${record.startedAt}`;
}

/**
 * The trainer's main loop: serves one job at a time, the earliest started one first; when it
 * stops, serves the next, and stays up between jobs. `stop()` preempts: the current minibatch
 * is finished, the task handed back and the loop ends.
 */
export class TrainerWorker {
  private readonly preempt = new AbortController();
  /** Job runs not to serve again: their spec is invalid, or they stopped. */
  private readonly finished = new Set<string>();
  private serving: Promise<void> | undefined;

  constructor(private readonly deps: TrainerWorkerDeps) {}

  /** Starts serving jobs in the background. */
  start(): void {
    this.serving ??= this.serve().catch((err: Error) =>
      this.deps.logger.error(`trainer loop ended: ${err.stack ?? err.message}`),
    );
  }

  /** Preempts the current job (hand-back) and waits for the loop to end. */
  async stop(): Promise<void> {
    this.preempt.abort();
    await this.serving;
  }

  private async serve(): Promise<void> {
    const { jobRecords, logger } = this.deps;
    const preempt = this.preempt.signal;
    while (!preempt.aborted) {
      const record = await jobRecords.waitForJob(preempt, (r) => this.finished.has(runKey(r)));
      if (record === undefined) break;
      let spec: JobSpec;
      try {
        spec = validateJobSpec(record.spec);
      } catch (err) {
        const reason = err instanceof InvalidJobSpecError ? err.message : String(err);
        logger.error(`job ${record.jobId}: cannot serve it: ${reason}`);
        this.finished.add(runKey(record));
        continue;
      }
      await this.serveJob(record, spec);
    }
  }

  private async serveJob(record: JobRecord, spec: JobSpec): Promise<void> {
    const { jobRecords, logger } = this.deps;
    const { jobId } = record;
    const stop = new AbortController();
    const stopJob = (why: string) => {
      if (stop.signal.aborted) return;
      logger.log(`job ${jobId}: ${why}`);
      this.finished.add(runKey(record));
      stop.abort();
    };
    const off = jobRecords.onChange((id, latest) => {
      if (id !== jobId) return;
      if (latest === null) stopJob('removed from the jobs bucket');
      else if (latest.startedAt !== record.startedAt) stopJob('replaced by a new submission');
      else if (!SERVED_JOB_STATES.has(latest.state))
        stopJob(`${latest.state}${latest.reason ? ` (${latest.reason})` : ''}`);
    });
    const events = this.deps.events?.(jobId);
    if (events !== undefined) {
      void (async () => {
        for await (const event of events) {
          if (event.type === 'stopped') stopJob(`stopped (${event.reason})`);
          if (event.type === 'failed') stopJob(`failed: ${event.error}`);
        }
      })().catch(() => undefined);
    }
    if (!jobRecords.isServed(jobId)) stopJob('no longer running');
    logger.log(`job ${jobId}: serving`);
    try {
      const end = await this.deps.jobTrainer.run(spec, { stop: stop.signal, preempt: this.preempt.signal });
      logger.log(end === 'stopped' ? `job ${jobId}: done serving; idle` : `job ${jobId}: preempted; task handed back`);
    } catch (err) {
      if (stop.signal.aborted || this.preempt.signal.aborted) return;
      logger.error(
        `job ${jobId}: ${(err as Error).message}; trying again in ${this.deps.setupRetryMs ?? JOB_SETUP_RETRY_MS} ms`,
      );
      await sleep(this.deps.setupRetryMs ?? JOB_SETUP_RETRY_MS, AbortSignal.any([stop.signal, this.preempt.signal]), {
        ref: false,
      });
    } finally {
      off();
      events?.stop();
    }
  }
}
