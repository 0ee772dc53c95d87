import type { JobEvent } from '#libs/messaging';

/** The part of the master's status reply that progress shows. */
export interface StatusSnapshot {
  state?: string;
  epoch?: number;
  tasks?: { total: number; done: number; pending: number; discarded: number };
  /** Recent epochs' accounting: the next epoch's too once its tasks started to go out. */
  epochs?: { epoch: number; done: number }[];
  samples?: number;
}

/** What `submit --wait` decided once the job ended. */
export interface JobOutcome {
  exitCode: number;
  line: string;
}

/**
 * Folds a job's events and status replies into one progress line, and decides when the job is
 * over: exit 0 when it stopped at its target and the model was exported, non-zero otherwise.
 */
export class JobProgress {
  private epoch = 0;
  private version = 0;
  private metric?: { name: string; value: number; best: number };
  private status: StatusSnapshot = {};
  private stopped?: Extract<JobEvent, { type: 'stopped' }>;
  private exported?: Extract<JobEvent, { type: 'model-exported' }>;
  private failed?: Extract<JobEvent, { type: 'failed' }>;
  /** An evaluation failure seen after the stop: no export will follow. */
  private exportFailed?: string;
  private readonly startedMs = Date.now();
  private firstSamples?: { at: number; samples: number };
  private samplesPerSecond = 0;

  constructor(
    readonly jobId: string,
    private readonly metricName: string,
  ) {}

  /** Takes one event; returns a line worth printing on its own, if any. */
  onEvent(event: JobEvent): string | undefined {
    switch (event.type) {
      case 'started':
        return (
          `job ${event.jobId} started: ${event.tasksPerEpoch} tasks per epoch, ` +
          `${event.records.toLocaleString('en-US')} records${event.seed !== undefined ? `, seed ${event.seed}` : ''}`
        );
      case 'epoch':
        this.epoch = event.epoch;
        return `epoch ${event.epoch} begins (previous: ${event.done} tasks done, ${event.discarded} discarded)`;
      case 'task-retried':
        return `task ${event.taskId} of epoch ${event.epoch} retried (${event.failures} failures): ${event.error}`;
      case 'task-discarded':
        return `task ${event.taskId} discarded for epoch ${event.epoch} after ${event.failures} failures: ${event.error}`;
      case 'waiting':
        return `waiting for trainers: ${event.trainers} present, ${event.min} needed`;
      case 'metrics': {
        this.version = event.version;
        const value = this.metricName === 'accuracy' ? (event.metrics.accuracy ?? NaN) : event.metrics.loss;
        this.metric = { name: this.metricName, value, best: event.best };
        return undefined;
      }
      case 'stopped':
        this.stopped = event;
        return `job stopped: ${event.reason}${event.detail ? ` (${event.detail})` : ''}`;
      case 'model-exported':
        this.exported = event;
        return `model written to ${event.output} (best ${this.metricName} ${event.bestValue.toFixed(4)})`;
      case 'evaluation-failed':
        if (this.stopped) this.exportFailed = event.error;
        return `evaluation failed${event.version === undefined ? '' : ` at version ${event.version}`}: ${event.error}`;
      case 'failed':
        this.failed = event;
        return `${event.refused ? 'submission refused' : 'job failed'}: ${event.field ? `${event.field}: ` : ''}${event.error}`;
      default:
        return undefined;
    }
  }

  /** Takes a status reply. */
  onStatus(status: StatusSnapshot): void {
    this.status = status;
    if (typeof status.epoch === 'number') this.epoch = status.epoch;
    if (typeof status.samples === 'number') {
      const now = Date.now();
      if (!this.firstSamples) this.firstSamples = { at: now, samples: status.samples };
      else if (now > this.firstSamples.at) {
        this.samplesPerSecond = ((status.samples - this.firstSamples.samples) * 1000) / (now - this.firstSamples.at);
      }
    }
  }

  /** The one-line summary of where the job is. */
  line(): string {
    const t = this.status.tasks;
    const next = this.status.epochs?.find((e) => e.epoch === this.epoch + 1);
    const notes = [
      ...(t?.pending ? [`${t.pending} in flight`] : []),
      ...(next !== undefined && next.done > 0 ? [`epoch ${next.epoch}: ${next.done} done`] : []),
    ];
    const parts = [
      `${this.jobId}`,
      `${Math.round((Date.now() - this.startedMs) / 1000)}s`,
      `epoch ${this.epoch}`,
      t ? `tasks ${t.done}/${t.total}${notes.length > 0 ? ` (${notes.join('; ')})` : ''}` : 'tasks ?',
      `step ${this.version}`,
    ];
    if (this.metric) {
      parts.push(`${this.metric.name} ${this.metric.value.toFixed(4)} (best ${this.metric.best.toFixed(4)})`);
    }
    if (this.samplesPerSecond > 0) parts.push(`${Math.round(this.samplesPerSecond).toLocaleString('en-US')} samples/s`);
    if (this.status.state && this.status.state !== 'running') parts.push(this.status.state);
    return parts.join(' | ');
  }

  /** The outcome once the job is over; undefined while it runs. `graceOver` ends waiting for the export. */
  outcome(graceOver: boolean): JobOutcome | undefined {
    if (this.failed) return { exitCode: 2, line: `job ${this.jobId} failed` };
    if (!this.stopped) return undefined;
    if (!this.exported && !graceOver && this.exportFailed === undefined) return undefined;
    const reason = this.stopped.reason;
    const where = this.exported
      ? `; model in ${this.exported.output}`
      : `; no model was exported${this.exportFailed ? ` (${this.exportFailed})` : ''}`;
    if (reason === 'target' && this.exported) {
      return { exitCode: 0, line: `job ${this.jobId} reached its target${where}` };
    }
    return { exitCode: 1, line: `job ${this.jobId} stopped (${reason}) before reaching its target${where}` };
  }

  /** When the job stopped, if it did. */
  get stoppedAt(): number | undefined {
    return this.stopped ? Date.parse(this.stopped.at) : undefined;
  }
}
