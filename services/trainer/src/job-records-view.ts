import type { JobChange, JobWatch } from '#libs/master-client';
import type { JobRecord } from '#libs/messaging';

/** Job states a trainer serves: running, or waiting for enough trainers to start. */
export const SERVED_JOB_STATES: ReadonlySet<JobRecord['state']> = new Set(['running', 'waiting']);

/**
 * The trainer's view of the jobs bucket: the latest record of every job, fed by a `JobWatch`,
 * with a way to wait for a job to serve and to hear when a job changes.
 */
export class JobRecordsView {
  private readonly records = new Map<string, JobRecord>();
  private readonly listeners = new Set<(jobId: string, record: JobRecord | null) => void>();
  private readonly done: Promise<void>;

  constructor(private readonly watch: JobWatch) {
    this.done = this.consume().catch(() => undefined);
  }

  /** The latest record of a job, if it is in the bucket. */
  get(jobId: string): JobRecord | undefined {
    return this.records.get(jobId);
  }

  /** Whether a job is in a state the trainer serves. */
  isServed(jobId: string): boolean {
    const record = this.records.get(jobId);
    return record !== undefined && SERVED_JOB_STATES.has(record.state);
  }

  /** The job to serve next: the earliest started served job that `skip` does not rule out. */
  nextJob(skip: (record: JobRecord) => boolean = () => false): JobRecord | undefined {
    let best: JobRecord | undefined;
    for (const record of this.records.values()) {
      if (!SERVED_JOB_STATES.has(record.state) || skip(record)) continue;
      if (best === undefined || record.startedAt < best.startedAt) best = record;
    }
    return best;
  }

  /** Waits for a job to serve; undefined when the signal fires or the watch ends. */
  async waitForJob(
    signal: AbortSignal,
    skip: (record: JobRecord) => boolean = () => false,
  ): Promise<JobRecord | undefined> {
    for (;;) {
      if (signal.aborted) return undefined;
      const next = this.nextJob(skip);
      if (next !== undefined) return next;
      const ended = await new Promise<boolean>((resolve) => {
        const off = this.onChange(() => finish(false));
        const onAbort = () => finish(true);
        signal.addEventListener('abort', onAbort, { once: true });
        void this.done.then(() => finish(true));
        function finish(stop: boolean) {
          off();
          signal.removeEventListener('abort', onAbort);
          resolve(stop);
        }
      });
      if (ended) return signal.aborted ? undefined : this.nextJob(skip);
    }
  }

  /** Calls `listener` on every change of a job's record (null: deleted); returns an unsubscribe. */
  onChange(listener: (jobId: string, record: JobRecord | null) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Stops watching the bucket. */
  stop(): void {
    this.watch.stop();
  }

  private async consume(): Promise<void> {
    for await (const change of this.watch as AsyncIterable<JobChange>) {
      if (change.record === null) this.records.delete(change.jobId);
      else this.records.set(change.jobId, change.record);
      for (const l of [...this.listeners]) l(change.jobId, change.record);
    }
  }
}
