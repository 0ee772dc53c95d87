import { Logger } from '@nestjs/common';
import { shuffleSettings } from '#libs/data-order';
import type { JobSpec } from '#libs/job-spec';
import type {
  EvaluationMetrics,
  JobEventInput,
  JobListEntry,
  JobStatusReply,
  StopReason,
  TaskClaim,
  TaskClaimReply,
  TaskCounts,
  TaskReport,
  TaskReportReply,
} from '#libs/messaging';
import { FencedWriteError, LostWritesError } from './errors.js';
import type { JobChannels } from './job-channels.js';
import type { StoredJob } from './job-store.js';
import type { MasterConfig } from './master-config.js';
import { jobListEntry, jobRecord, jobState, jobStatus } from './job-status.js';
import type { PlannedTask } from './task-plan.js';
import { TaskQueue, type Dispatch, type QueueChange, type TaskQueueOptions, type Transition } from './task-queue.js';

/** The master's settings a job's queue takes. */
export type QueueSettings = Pick<MasterConfig, 'durationWindow'> &
  Partial<Pick<MasterConfig, 'maxJobFaults' | 'claimLeaseMs'>>;

/**
 * The queue limits a job spec and the master's settings set, and its task order.
 * @throws MissingSeedError when the spec shuffles but has no seed (the intake always sets one).
 */
export function queueOptions(spec: JobSpec, settings: QueueSettings): TaskQueueOptions {
  const { durationWindow, maxJobFaults, claimLeaseMs } = settings;
  const options: TaskQueueOptions = {
    maxTaskFailures: spec.training.maxTaskFailures,
    failBarrenEpochs: true,
    ...(maxJobFaults !== undefined ? { maxJobFaults } : {}),
    ...(claimLeaseMs !== undefined ? { claimLeaseMs } : {}),
    timeout: { ...spec.training.taskTimeout, window: durationWindow },
    maxTrainers: spec.trainers.max,
  };
  if (spec.stop.maxEpochs !== undefined) options.maxEpochs = spec.stop.maxEpochs;
  if (spec.stop.maxSeconds !== undefined) options.maxSeconds = spec.stop.maxSeconds;
  const shuffle = shuffleSettings(spec.id, spec.training);
  if (shuffle !== undefined) options.shuffleSeed = shuffle.seed;
  return options;
}

/**
 * Drives one job: runs its queue's transitions one at a time, persists each before anyone
 * hears of it, then publishes its events, task messages and directory entry. Holds the job's
 * dispatch window at `min(max(1, live trainers), trainers.max) + 1` unclaimed tasks, and does
 * not dispatch while fewer than `trainers.min` trainers are alive.
 */
export class JobDriver {
  private readonly logger: Logger;
  private chain: Promise<unknown> = Promise.resolve();
  private waiting = false;
  private trainers = 0;
  private outOfSync = false;
  /**
   * Transitions whose write failed with its outcome unknown (Redis away), not yet announced:
   * `resync` announces them when the state that stands includes them, and drops them when it
   * does not (the transition is then made again, and announced then).
   */
  private unannounced: { change: QueueChange; events: readonly JobEventInput[]; writesBefore: number }[] = [];
  /** The last metrics the evaluator published for the job. */
  lastMetrics: EvaluationMetrics | undefined;
  /** The best value of the job's metric the evaluator last published. */
  best: number | undefined;
  /** Told of each task counted done, with its duration in milliseconds (the metrics). */
  onTaskDone?: (durationMs: number) => void;

  constructor(
    readonly spec: JobSpec,
    readonly plan: readonly PlannedTask[],
    private queue: TaskQueue,
    private readonly channels: JobChannels,
    private readonly options: TaskQueueOptions,
    /** The lease token of the term this driver belongs to; its writes are fenced with it. */
    private readonly fence: string,
    /** Stream sequence of the spec message the job came from. */
    private readonly submitSeq: number,
    /** How many writes of the job Redis had applied when `queue` was read or written. */
    private writes: number,
  ) {
    this.logger = new Logger(`Job ${spec.id}`);
  }

  get jobId(): string {
    return this.queue.jobId;
  }

  /** The job incarnation this driver drives (a resubmission of the id gets a new one). */
  get runId(): string {
    return this.queue.runId;
  }

  /** Whether the job still runs (possibly waiting for trainers). */
  get running(): boolean {
    return this.queue.state === 'running';
  }

  /** The job's status reply. */
  status(): JobStatusReply {
    return jobStatus({
      spec: this.spec,
      queue: this.queue,
      waiting: this.waiting,
      trainers: this.trainers,
      lastMetrics: this.lastMetrics,
    });
  }

  /** Task counters of the current epoch (the status reply's `tasks`). */
  epochTasks(): TaskCounts {
    return this.queue.counts();
  }

  /**
   * Task counters of the next epoch while its tasks go out beside the current one's (epochs
   * overlap by one); undefined while only the current epoch is open.
   */
  nextEpochTasks(): TaskCounts | undefined {
    return this.queue.nextEpochOpen ? this.queue.counts(this.queue.epoch + 1) : undefined;
  }

  /** The job's line in the jobs list. */
  listEntry(): JobListEntry {
    return jobListEntry({
      spec: this.spec,
      queue: this.queue,
      waiting: this.waiting,
      trainers: this.trainers,
      lastMetrics: this.lastMetrics,
      best: this.best,
    });
  }

  /** When the job stopped (epoch ms), or undefined while it runs. */
  get stoppedAtMs(): number | undefined {
    return this.queue.stoppedAt;
  }

  /**
   * The job as this driver last wrote it, with its write count and this term's token as the
   * writer. Read once the driver has settled, it is what Redis should hold.
   */
  stored(): StoredJob & { writes: number; writer: string } {
    return {
      spec: this.spec,
      plan: this.plan as PlannedTask[],
      submitSeq: this.submitSeq,
      queue: this.queue.snapshot(),
      writes: this.writes,
      writer: this.fence,
    };
  }

  /** Resolves once every operation queued so far has finished. */
  idle(): Promise<void> {
    return this.serialize(async () => undefined);
  }

  /** Like `idle`, without re-reading Redis first: for a driver being dropped. */
  settled(): Promise<void> {
    return this.chain.then(() => undefined);
  }

  /** Writes the job's directory entry (after a start or a restart). */
  publishRecord(): Promise<void> {
    return this.serialize(() => this.channels.putRecord(jobRecord(this.view())));
  }

  /** A trainer claims a task it pulled; the window refills right after. */
  claim(claim: TaskClaim): Promise<TaskClaimReply> {
    return this.serialize(async () => {
      const reply = await this.apply(this.queue.claim(claim));
      await this.fill();
      return reply;
    });
  }

  /** A trainer reports a task; the window refills right after. */
  report(report: TaskReport): Promise<TaskReportReply> {
    return this.serialize(async () => {
      const t = this.queue.report(report);
      if (t.change === null) {
        this.logger.debug(`ignored ${report.outcome} report of task ${report.taskId} (dispatch ${report.dispatchId})`);
      }
      const reply = await this.apply(t);
      if (t.change?.counted) this.onTaskDone?.(t.change.counted.durationMs);
      await this.fill();
      return reply;
    });
  }

  /**
   * A trainer or the evaluator could not set the job up; enough of these fail the job (see
   * `TaskQueue.fault`). False when the job no longer runs.
   */
  fault(source: string, error: string): Promise<boolean> {
    return this.serialize(() => this.apply(this.queue.fault(source, error)));
  }

  /** Stops the job; false when it had already stopped. */
  stop(reason: StopReason, detail?: string): Promise<boolean> {
    return this.serialize(() => this.apply(this.queue.stop(reason, detail)));
  }

  /** Gives every claimed task at least one claim lease from now (see `TaskQueue.rearmClaims`). */
  rearmClaims(): Promise<number> {
    return this.serialize(() => this.apply(this.queue.rearmClaims()));
  }

  /**
   * One pass of the dispatch loop: timeouts and the time budget, the trainers.min check, and
   * refilling the dispatch window. `share`: the job's fair share of the live trainers while
   * several jobs run (claims beyond it are refused `full`, so those trainers serve other jobs).
   */
  tick(liveTrainers: number, share?: number): Promise<void> {
    return this.serialize(async () => {
      this.trainers = liveTrainers;
      this.queue.setTrainerShare(share);
      await this.apply(this.queue.expire());
      if (!this.running) return;
      const waiting = liveTrainers < this.spec.trainers.min;
      if (waiting !== this.waiting) {
        this.waiting = waiting;
        if (waiting) {
          this.logger.log(`waiting for trainers: ${liveTrainers} alive, ${this.spec.trainers.min} needed`);
          this.channels.publishEvent({
            type: 'waiting',
            jobId: this.jobId,
            trainers: liveTrainers,
            min: this.spec.trainers.min,
          });
        } else {
          this.logger.log(`${liveTrainers} trainers alive; dispatching`);
        }
        // The writer keeps trying a failed write; dispatching need not wait for it.
        await this.channels
          .putRecord(jobRecord(this.view()))
          .catch((err: Error) => this.logger.warn(`updating the jobs bucket failed (retrying): ${err.message}`));
      }
      await this.fill();
    });
  }

  private view() {
    return { spec: this.spec, queue: this.queue, waiting: this.waiting };
  }

  /** Runs `work` after everything queued before it, on state that matches Redis. */
  private serialize<T>(work: () => Promise<T>): Promise<T> {
    const next = this.chain.then(async () => {
      if (this.outOfSync) await this.resync();
      return work();
    });
    this.chain = next.catch(() => undefined);
    return next;
  }

  /**
   * Persists a transition, then lets the world know: on a stop the task messages are purged,
   * the directory entry follows any epoch or state change, and the events go out last.
   */
  private async apply<R>(t: Transition<R>): Promise<R> {
    if (t.change !== null) {
      const writesBefore = this.writes;
      try {
        this.writes = await this.channels.persist(this.jobId, t.change, this.fence, this.writes);
      } catch (err) {
        // The in-memory queue already moved on; re-read what Redis holds before the next step.
        this.outOfSync = true;
        if (!(err instanceof LostWritesError)) {
          // Refused at the fence, it did not land; otherwise it may have.
          if (!(err instanceof FencedWriteError))
            this.unannounced.push({ change: t.change, events: t.events, writesBefore });
          throw err;
        }
        await this.rewrite(err.message);
      }
    }
    await this.announce(t.change, t.events);
    return t.result;
  }

  /**
   * Lets the world know of a persisted change (or of events with none): on a stop the task
   * messages are purged, the directory entry follows any epoch or state change, and the events
   * go out last.
   */
  private async announce(change: QueueChange | null, events: readonly JobEventInput[]): Promise<void> {
    if (change !== null) await this.announceChange(change);
    for (const event of events) this.channels.publishEvent(event);
  }

  /** A persisted change's part of `announce`: the stop's log line and purge, the directory entry. */
  private async announceChange(change: QueueChange): Promise<void> {
    const stopped = change.job.state === 'stopped' || change.job.state === 'failed';
    if (change.job.state === 'failed') this.logger.warn(`failed: ${this.queue.detail}`);
    else if (stopped) {
      this.logger.log(`stopped (${this.queue.reason}${this.queue.detail ? `: ${this.queue.detail}` : ''})`);
    }
    if (stopped) {
      await this.channels
        .purgeTasks(this.jobId)
        .catch((err: Error) => this.logger.warn(`purging task messages failed: ${err.message}`));
    }
    if (change.job.epoch !== undefined || stopped) {
      await this.channels
        .putRecord(jobRecord(this.view()))
        .catch((err: Error) => this.logger.warn(`updating the jobs bucket failed (retrying): ${err.message}`));
    }
  }

  /**
   * After a resync: announces each transition whose write failed when `stands` says the state now
   * kept includes it (given the job's write count before that write), and drops the rest.
   */
  private async announceLanded(stands: (writesBefore: number) => boolean): Promise<void> {
    for (const t of this.unannounced.splice(0)) {
      if (stands(t.writesBefore)) await this.announce(t.change, t.events);
    }
  }

  /** Tops the window of published-but-unclaimed tasks up. */
  private async fill(): Promise<void> {
    if (!this.running || this.waiting) return;
    const window = Math.min(Math.max(1, this.trainers), this.queue.trainerLimit() ?? this.spec.trainers.max) + 1;
    const limit = window - this.queue.unclaimedCount();
    if (limit <= 0) return;
    const dispatches = await this.apply(this.queue.dispatch(limit));
    for (const d of dispatches) await this.publish(d);
  }

  private async publish(d: Dispatch): Promise<void> {
    const task = this.plan[d.taskId];
    if (task === undefined) return;
    try {
      await this.channels.publishTask({
        jobId: this.jobId,
        epoch: d.epoch,
        taskId: d.taskId,
        dispatchId: d.dispatchId,
        chunks: task.chunks,
      });
    } catch (err) {
      // The task stays pending; its deadline returns it to todo and it is dispatched again.
      this.logger.warn(`publishing task ${d.taskId} failed: ${(err as Error).message}`);
    }
  }

  /**
   * After a failed write: takes up what Redis holds, the failed write landed or not; unless Redis
   * holds fewer writes of the job than it answered, when the state in memory is written instead.
   */
  private async resync(): Promise<void> {
    const stored = await this.channels.store.load(this.jobId);
    const found = stored?.writes ?? 0;
    if (stored === undefined || found < this.writes) {
      await this.rewrite(
        `job ${this.jobId}: Redis holds ${stored ? `${found} writes of the job` : 'nothing of the job'}, it answered ${this.writes}`,
      );
      // The state in memory, with every transition made since, is what stands now.
      await this.announceLanded(() => true);
      return;
    }
    this.queue = TaskQueue.restore(stored.queue, this.options);
    this.writes = found;
    this.outOfSync = false;
    // A failed write that landed all the same left Redis a write further than before it, by this term.
    await this.announceLanded((writesBefore) => found > writesBefore && stored.writer === this.fence);
    this.logger.warn(
      `state re-read from Redis after a failed write (epoch ${this.queue.epoch}, ${jobState(this.view())})`,
    );
  }

  /**
   * Redis lost writes it had answered (a crash of a Redis that does not fsync every write): the
   * state in memory, which trainers and events already acted on, is written over it whole.
   * Going back to what Redis holds would dispatch again tasks already trained on.
   */
  private async rewrite(why: string): Promise<void> {
    this.logger.warn(`${why}: Redis lost writes it had answered; writing the job's state from memory`);
    this.writes = await this.channels.rewrite(this.stored(), this.fence);
    this.outOfSync = false;
  }
}
