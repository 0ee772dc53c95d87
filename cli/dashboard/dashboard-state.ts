import {
  MEMBERS_BUCKET_TTL_MS,
  type EpochAccounting,
  type JobEvent,
  type JobListEntry,
  type JobState,
  type JobStatusReply,
  type MemberStatus,
  type StopReason,
  type TaskCounts,
} from '#libs/messaging';

/** Evaluations kept per job for the curves; older ones are dropped first. */
export const MAX_POINTS_PER_JOB = 5_000;
/** Throughput samples kept per job. */
export const MAX_THROUGHPUT_POINTS_PER_JOB = 2_000;
/** Events kept per job for the event log. */
export const MAX_EVENTS_PER_JOB = 200;
/**
 * A member whose last refresh is older than this is left out: its bucket entry lapsed (the
 * bucket's TTL, plus slack for a refresh in flight) without a delete that a watch would see.
 */
export const MEMBER_STALE_MS = MEMBERS_BUCKET_TTL_MS + 5_000;

/** One evaluation of a job: where it was taken (step, time, samples) and what it scored. */
export interface EvaluationPoint {
  /** Model version (optimizer step) of the scored snapshot. */
  step: number;
  /** When the evaluation was published, in epoch milliseconds. */
  t: number;
  /** Examples trained on when the snapshot was scored, when the master counted them. */
  samples?: number;
  /** The job's metric (`evaluation.metric`); for a loss metric, the loss itself. */
  metric?: number;
  loss: number;
}

/** The job's training throughput at one moment, from the master's sample counter. */
export interface ThroughputPoint {
  t: number;
  samplesPerSecond: number;
}

/** Everything the dashboard shows of one job. */
export interface JobView {
  jobId: string;
  state: JobState | 'submitted';
  reason?: StopReason;
  /** What went wrong, for a failed job. */
  error?: string;
  metric: 'accuracy' | 'loss';
  lastValue?: number;
  best?: number;
  epoch: number;
  trainers: number;
  startedAt?: string;
  stoppedAt?: string;
  output?: string;
  /** The current epoch's task queue, from the master's last status reply. */
  tasks?: TaskCounts;
  /** The epoch `tasks` counts (the status reply's; `epoch` may be ahead of it by an event). */
  tasksEpoch?: number;
  /** Closed epochs' accounting, from the master's last status reply. */
  epochs: EpochAccounting[];
  /** Examples trained on so far, over every trainer. */
  samples?: number;
  points: EvaluationPoint[];
  throughput: ThroughputPoint[];
  events: JobEvent[];
}

/** A live process as the dashboard shows it (its latest refresh in the members bucket). */
export type MemberView = MemberStatus;

/** What the page is sent: the whole picture at one moment. */
export interface DashboardSnapshot {
  /** Whether the dashboard's NATS connection is up. */
  connected: boolean;
  /** Whether a master answered the last jobs request. */
  masterAnswering: boolean;
  /** When the snapshot was taken (ISO). */
  at: string;
  /** Running jobs first, then the others, newest first. */
  jobs: JobView[];
  /** Live members by role and id. */
  members: MemberView[];
}

/** Appends to a bounded list, dropping the oldest entries beyond `max`. */
function pushBounded<T>(list: T[], item: T, max: number): void {
  list.push(item);
  if (list.length > max) list.splice(0, list.length - max);
}

const ROLE_ORDER = ['master', 'pserver', 'trainer', 'evaluator'];
const ACTIVE_STATES = new Set(['running', 'waiting', 'submitted']);

/**
 * The dashboard's picture of the cluster, fed with plain objects from NATS (the master's job
 * list and status replies, job events, members-bucket entries, the connection's state), and
 * read as a {@link DashboardSnapshot}. Listeners hear of every change.
 */
export class DashboardState {
  private readonly jobs = new Map<string, JobView>();
  private readonly members = new Map<string, MemberView>();
  private readonly listeners = new Set<() => void>();
  private connected = false;
  private masterAnswering = false;
  /** Each job's start as the master's list last gave it: a new one means the id was used again. */
  private readonly listedStarts = new Map<string, string>();
  /** Each job's last sample count and when it was read, for throughput. */
  private readonly lastSamples = new Map<string, { t: number; samples: number }>();

  constructor(private readonly now: () => number = Date.now) {}

  /** Calls `listener` after every change; returns a function that removes it. */
  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** The NATS connection went down or came back. */
  setConnected(connected: boolean): void {
    if (this.connected === connected) return;
    this.connected = connected;
    this.changed();
  }

  /** The master answered a jobs request (true) or no master answered in time (false). */
  setMasterAnswering(answering: boolean): void {
    if (this.masterAnswering === answering) return;
    this.masterAnswering = answering;
    this.changed();
  }

  /** The master's list of every job it knows (`tributary.jobs.list` with `all`). */
  onJobList(entries: readonly JobListEntry[]): void {
    for (const e of entries) {
      const job = this.job(e.jobId);
      const known = this.listedStarts.get(e.jobId);
      if (known !== undefined && known !== e.startedAt) this.resetRun(job, e.startedAt);
      this.listedStarts.set(e.jobId, e.startedAt);
      Object.assign(job, {
        state: e.state,
        reason: e.reason,
        metric: e.metric,
        lastValue: e.lastValue,
        best: e.best,
        epoch: e.epoch,
        trainers: e.trainers,
        startedAt: e.startedAt,
        stoppedAt: e.stoppedAt,
        output: e.output,
      });
    }
    this.changed();
  }

  /** The master's status reply for one job; its sample counter gives the throughput. */
  onJobStatus(status: JobStatusReply): void {
    const job = this.job(status.jobId);
    Object.assign(job, {
      state: status.state,
      reason: status.reason,
      epoch: status.epoch,
      tasks: status.tasks,
      tasksEpoch: status.epoch,
      epochs: status.epochs,
      samples: status.samples,
      trainers: status.trainers,
      stoppedAt: status.stoppedAt,
    });
    const t = this.now();
    const last = this.lastSamples.get(status.jobId);
    if (last !== undefined && t > last.t && status.samples >= last.samples && status.state === 'running') {
      const samplesPerSecond = ((status.samples - last.samples) * 1000) / (t - last.t);
      pushBounded(job.throughput, { t, samplesPerSecond }, MAX_THROUGHPUT_POINTS_PER_JOB);
    }
    this.lastSamples.set(status.jobId, { t, samples: status.samples });
    this.changed();
  }

  /** A lifecycle event of a job, live or replayed from the events stream. */
  onEvent(event: JobEvent): void {
    const job = this.job(event.jobId);
    switch (event.type) {
      case 'submitted':
        if (!ACTIVE_STATES.has(job.state) || job.startedAt === undefined) job.state = 'submitted';
        break;
      case 'started':
        if (job.events.some((e) => e.type === 'started')) this.resetRun(job, event.at);
        job.state = 'running';
        job.epoch = event.epoch;
        job.startedAt ??= event.at;
        break;
      case 'epoch':
        job.epoch = Math.max(job.epoch, event.epoch);
        break;
      case 'metrics': {
        const value = job.metric === 'loss' ? event.metrics.loss : event.metrics[job.metric];
        pushBounded(
          job.points,
          {
            step: event.version,
            t: Date.parse(event.at),
            samples: event.samples,
            metric: value,
            loss: event.metrics.loss,
          },
          MAX_POINTS_PER_JOB,
        );
        job.lastValue = value;
        job.best = event.best;
        break;
      }
      case 'stopped':
        job.state = 'stopped';
        job.reason = event.reason;
        job.stoppedAt = event.at;
        break;
      case 'failed':
        // A refused submission leaves a running job of the same id alone.
        if (event.refused !== true || !ACTIVE_STATES.has(job.state) || job.startedAt === undefined) {
          job.state = 'failed';
          job.error = event.field === undefined ? event.error : `${event.field}: ${event.error}`;
        }
        break;
      case 'model-exported':
        job.output = event.output;
        break;
      default:
        break;
    }
    pushBounded(job.events, event, MAX_EVENTS_PER_JOB);
    this.changed();
  }

  /** A members-bucket entry was written (`status`) or deleted (`status` undefined). */
  onMember(key: string, status: MemberStatus | undefined): void {
    if (status === undefined) this.members.delete(key);
    else this.members.set(key, status);
    this.changed();
  }

  /** The whole picture now; members whose refresh is older than {@link MEMBER_STALE_MS} are left out. */
  snapshot(): DashboardSnapshot {
    const now = this.now();
    const jobs = [...this.jobs.values()].sort(
      (a, b) =>
        Number(ACTIVE_STATES.has(b.state)) - Number(ACTIVE_STATES.has(a.state)) ||
        (b.startedAt ?? '').localeCompare(a.startedAt ?? '') ||
        a.jobId.localeCompare(b.jobId),
    );
    const members = [...this.members.values()]
      .filter((m) => !(now - Date.parse(m.at) > MEMBER_STALE_MS))
      .sort((a, b) => ROLE_ORDER.indexOf(a.role) - ROLE_ORDER.indexOf(b.role) || a.id.localeCompare(b.id));
    return {
      connected: this.connected,
      masterAnswering: this.masterAnswering,
      at: new Date(now).toISOString(),
      jobs,
      members,
    };
  }

  private job(jobId: string): JobView {
    let job = this.jobs.get(jobId);
    if (job === undefined) {
      job = {
        jobId,
        state: 'submitted',
        metric: 'accuracy',
        epoch: 0,
        trainers: 0,
        epochs: [],
        points: [],
        throughput: [],
        events: [],
      };
      this.jobs.set(jobId, job);
    }
    return job;
  }

  /**
   * A job id was used again, its new run started at `since` (ISO): the curves and the log of the
   * earlier run do not belong to this one (what came after `since` does).
   */
  private resetRun(job: JobView, since: string): void {
    const from = Date.parse(since);
    job.points = job.points.filter((p) => p.t >= from);
    job.throughput = job.throughput.filter((p) => p.t >= from);
    job.events = job.events.filter((e) => Date.parse(e.at) >= from);
    job.startedAt = undefined;
    job.stoppedAt = undefined;
    job.reason = undefined;
    job.error = undefined;
    job.lastValue = undefined;
    job.best = undefined;
    this.lastSamples.delete(job.jobId);
  }

  private changed(): void {
    for (const listener of this.listeners) listener();
  }
}
