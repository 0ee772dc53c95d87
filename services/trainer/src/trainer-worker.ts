import { InvalidJobSpecError, prepareJobSpecValidation, validateJobSpec, type JobSpec } from '#libs/job-spec';
import type { LineLogger } from '#libs/logging';
import type { EventSubscription } from '#libs/master-client';
import type { JobRecord } from '#libs/messaging';
import { sleep } from '#libs/retry';
import { FULL_JOB_RETRY_MS, JOB_SETUP_RETRY_MS } from './defaults.js';
import { JobSetupError } from './errors.js';
import { SERVED_JOB_STATES, type JobRecordsView } from './job-records-view.js';
import type { JobTrainer } from './job-trainer.js';

/** What a `TrainerWorker` needs. */
export interface TrainerWorkerDeps {
  jobRecords: JobRecordsView;
  jobTrainer: Pick<JobTrainer, 'run'>;
  /** Live events of a job, to hear `stopped` before the jobs bucket says so. */
  events?: (jobId: string) => EventSubscription;
  logger: LineLogger;
  /**
   * Tells the master that the job's run cannot be set up here (a `JobSetupError`); enough such
   * reports fail the job.
   */
  reportFault?: (record: JobRecord, error: string) => Promise<unknown>;
  /** Pause before a job whose set-up failed is tried again. */
  setupRetryMs?: number;
  /** Pause before a job that had its share of trainers is tried again. */
  fullJobRetryMs?: number;
}

/** Identifies one run of a job id (a resubmitted job has a new `startedAt`). */
function runKey(record: JobRecord): string {
  return `${record.jobId}@${record.startedAt}`;
}

/**
 * The trainer's main loop: serves one job at a time, the earliest started one first; when it
 * stops, serves the next, and stays up between jobs. A job that has its share of trainers at
 * work, or whose model cannot be built here (reported to the master), is set aside for a while
 * and the next job served, so one job never holds every trainer. `stop()` preempts: the current
 * minibatch is finished, the task handed back and the loop ends.
 */
export class TrainerWorker {
  private readonly preempt = new AbortController();
  /** Job runs not to serve again: their spec is invalid, or they stopped. */
  private readonly finished = new Set<string>();
  /** Job runs set aside (full, or failed to set up), until the time given. */
  private readonly setAside = new Map<string, number>();
  private serving: Promise<void> | undefined;

  constructor(private readonly deps: TrainerWorkerDeps) {}

  /** Starts serving jobs in the background. */
  start(): void {
    prepareJobSpecValidation();
    this.serving ??= this.serve().catch((err: Error) =>
      this.deps.logger.error(`trainer loop ended: ${err.stack ?? err.message}`),
    );
  }

  /**
   * Whether a job other than `jobId` waits to be served and is not set aside (so a trainer
   * turned away by `jobId` has work elsewhere).
   */
  hasOtherJob(jobId: string): boolean {
    const now = Date.now();
    return this.deps.jobRecords.nextJob((r) => r.jobId === jobId || this.unavailable(r, now)) !== undefined;
  }

  /** A run not to serve now: it ended here, or it is set aside until later. */
  private unavailable(record: JobRecord, now: number): boolean {
    return this.finished.has(runKey(record)) || (this.setAside.get(runKey(record)) ?? 0) > now;
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
      const found = await jobRecords.waitForJob(preempt, (r) => this.finished.has(runKey(r)));
      if (found === undefined) break;
      const now = Date.now();
      const record = jobRecords.nextJob((r) => this.unavailable(r, now)) ?? found;
      const until = this.setAside.get(runKey(record));
      if (until !== undefined && until > now) {
        // Nothing else to serve: pause, then try the job again.
        await sleep(until - now, preempt, { ref: false }).catch(() => undefined);
        continue;
      }
      this.setAside.delete(runKey(record));
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
          // A refused submission of the same id leaves the running job alone.
          if (event.type === 'failed' && event.refused !== true) stopJob(`failed: ${event.error}`);
        }
      })().catch(() => undefined);
    }
    if (!jobRecords.isServed(jobId)) stopJob('no longer running');
    logger.log(`job ${jobId}: serving`);
    try {
      const end = await this.deps.jobTrainer.run(spec, { stop: stop.signal, preempt: this.preempt.signal });
      if (end === 'full')
        this.setAside.set(runKey(record), Date.now() + (this.deps.fullJobRetryMs ?? FULL_JOB_RETRY_MS));
      else
        logger.log(
          end === 'stopped' ? `job ${jobId}: done serving; idle` : `job ${jobId}: preempted; task handed back`,
        );
    } catch (err) {
      if (stop.signal.aborted || this.preempt.signal.aborted) return;
      if (err instanceof JobSetupError) {
        logger.error(`${err.message}; reporting it to the master and serving other jobs meanwhile`);
        this.setAside.set(runKey(record), Date.now() + (this.deps.setupRetryMs ?? JOB_SETUP_RETRY_MS));
        await this.deps
          .reportFault?.(record, err.message)
          .catch((e: Error) => logger.warn(`job ${jobId}: reporting the failure failed: ${e.message}`));
        return;
      }
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
