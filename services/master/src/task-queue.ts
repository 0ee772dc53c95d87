import type {
  EpochAccounting,
  JobEventInput,
  StopReason,
  TaskClaim,
  TaskClaimReply,
  TaskCounts,
  TaskReport,
  TaskReportReply,
} from '#libs/messaging';
import { epochTaskOrder } from '#libs/data-order';
import { epochBudgetSpent, timeBudgetSpent, type JobBudget } from './job-budget.js';
import { CLAIM_LEASE_MS, recordDuration, taskTimeoutMs, type TaskTimeoutPolicy } from './task-timeout.js';

/** Epoch accounts kept in memory (and shown in status): the current one and a few before it. */
export const KEPT_EPOCHS = 5;

/** Where a task stands in its epoch. */
export type TaskStatus = 'todo' | 'pending' | 'done' | 'discarded';

/** One task's state in one epoch (the current one, or the next once it opened), as persisted. */
export interface TaskState {
  taskId: number;
  status: TaskStatus;
  /** Failures and timeouts in its epoch. */
  failures: number;
  /** The current dispatch while pending (and the last one after). */
  dispatchId?: string;
  dispatchedAt?: number;
  /** The trainer that claimed the current dispatch, once claimed. */
  claimedBy?: string;
  claimedAt?: number;
  /** When the pending task counts as lost (epoch ms). */
  deadline?: number;
  lastError?: string;
}

/**
 * Whether the job still hands out tasks: it runs, stopped (a budget, the evaluator or a user),
 * or failed (it cannot run: see {@link TaskQueue.fault}).
 */
export type QueueLifecycle = 'running' | 'stopped' | 'failed';

/** The error a task's failure records when its deadline passed. */
const TIMEOUT_ERROR = 'timeout';

/** Default of `TaskQueueOptions.maxJobFaults`. */
export const MAX_JOB_FAULTS = 3;

/** Totals of one finished epoch. */
export interface EpochSummary {
  epoch: number;
  done: number;
  discarded: number;
}

/** The complete state of a job's task queue: what the store persists and restores. */
export interface QueueSnapshot {
  jobId: string;
  /** Random per job incarnation, so dispatch ids never repeat across resubmissions. */
  runId: string;
  state: QueueLifecycle;
  reason?: StopReason;
  detail?: string;
  epoch: number;
  startedAt: number;
  stoppedAt?: number;
  /** Examples trained on, from counted done reports. */
  samples: number;
  /** Attempts to run the job that failed (trainers or the evaluator could not set it up). */
  faults?: number;
  /** Dispatches made so far (the sequence part of dispatch ids). */
  dispatchSeq: number;
  /** Recent task durations, oldest first. */
  durationsMs: number[];
  tasks: TaskState[];
  /**
   * The next epoch's tasks, once it opened: when the current epoch had no task left to hand out
   * (its last ones pending), so trainers done with their part go on with the next epoch instead
   * of waiting for the slowest. Absent otherwise.
   */
  next?: TaskState[];
  /** Accounting of recent epochs, oldest first, the current one last (then the next, once open). */
  epochs: EpochAccounting[];
}

/** The job-level fields a transition may change. */
export type QueueFields = Pick<
  QueueSnapshot,
  'state' | 'reason' | 'detail' | 'epoch' | 'stoppedAt' | 'samples' | 'dispatchSeq' | 'durationsMs' | 'faults'
>;

/**
 * What one transition changed, for the store to write atomically: job fields, the new state of
 * each task that changed (in the current epoch and in the next), a done count to increment, and
 * the summaries of the epochs that ended.
 */
export interface QueueChange {
  job: Partial<QueueFields>;
  /** Tasks of the current epoch (the one in `job.epoch` when the change moves it). */
  tasks: TaskState[];
  /** Tasks of the next epoch: every one when it opens, then those that changed. */
  next?: TaskState[];
  /**
   * True when an epoch ended: the stored next epoch's tasks go, as they are now in `tasks`
   * (written after the drop), and `next` holds whatever the new next epoch has.
   */
  dropNext?: boolean;
  /** A task counted done, with how long it took from its claim (or dispatch) to the report. */
  counted?: { epoch: number; taskId: number; durationMs: number };
  /** The epochs that ended, in order: usually one, two when the next had finished already. */
  closedEpochs?: EpochSummary[];
}

/** The outcome of a transition: its result, the change to persist (null: none) and events to publish. */
export interface Transition<R> {
  result: R;
  change: QueueChange | null;
  events: JobEventInput[];
}

/** A task handed out: publish it as a `TaskMessage`. */
export interface Dispatch {
  taskId: number;
  epoch: number;
  dispatchId: string;
  deadline: number;
}

/** Limits of a job's queue, from its spec. */
export interface TaskQueueOptions extends JobBudget {
  /** A task failing (or timing out) more often than this in one epoch is discarded for the epoch. */
  maxTaskFailures: number;
  timeout: TaskTimeoutPolicy;
  /**
   * How long a claim holds unless renewed; default {@link CLAIM_LEASE_MS}. The task timeout caps
   * it when shorter.
   */
  claimLeaseMs?: number;
  /** Most distinct trainers holding claimed tasks at once; a claim beyond is refused `full`. */
  maxTrainers?: number;
  /** Failed attempts to run the job (see `fault`) after which it fails; default {@link MAX_JOB_FAULTS}. */
  maxJobFaults?: number;
  /**
   * True: an epoch that ends with no task done and every task discarded for failures its
   * trainers reported (not timeouts) fails the job, naming the last error; another epoch would
   * fail the same way. False (default): the next epoch starts.
   */
  failBarrenEpochs?: boolean;
  /** Epoch accounts kept; default {@link KEPT_EPOCHS}. */
  keptEpochs?: number;
  /**
   * Present: each epoch hands its tasks out in its own seeded order, `epochTaskOrder(tasks,
   * shuffleSeed, epoch)`. Absent: by task id, which is file and chunk order.
   */
  shuffleSeed?: number;
}

/** Milliseconds since the Unix epoch; injected so tests control time. */
export type Clock = () => number;

/** What a fresh job's queue starts from. */
export interface NewQueue {
  jobId: string;
  runId: string;
  taskCount: number;
  startedAt: number;
}

function freshTask(taskId: number): TaskState {
  return { taskId, status: 'todo', failures: 0 };
}

/** Drops the fields that only make sense while a task is pending. */
function settled(task: TaskState, status: TaskStatus, extra: Partial<TaskState> = {}): TaskState {
  const { deadline: _d, claimedBy: _c, claimedAt: _a, dispatchedAt: _t, ...rest } = task;
  return { ...rest, status, ...extra };
}

/**
 * The task state machine of one job. Each task goes todo → pending (dispatched, then claimed) →
 * done, or back to todo on failure, timeout or hand-back, or to discarded after more than
 * `maxTaskFailures` failures; when no task is todo or pending the epoch ends and every task
 * (discarded ones too) starts over. Every transition mutates the in-memory state and returns the
 * change to persist plus the events to publish. No I/O happens here.
 *
 * Epochs overlap by one: once the current epoch has no task left to hand out (its last ones are
 * pending), the next epoch opens and its tasks go out, so a trainer done with its part does not
 * wait for the slowest one's last task. The current epoch keeps priority: a task of it that goes
 * back to todo is handed out before any more of the next. The next epoch opens only within
 * `maxEpochs`, and it becomes the current one when the current ends (ending too, at once, if every
 * task of it is settled by then). Each epoch still trains on every task once.
 *
 * The queue is the only place a job stops on its budgets (`maxEpochs`, `maxSeconds`): it holds
 * the epoch counter and the start time in the fenced Redis state, so the budget holds across
 * master failovers and whether or not an evaluator runs. The evaluator stops jobs on its metric
 * (`target`, `patience`) through a stop request.
 */
export class TaskQueue {
  private s: QueueSnapshot;
  private readonly keptEpochs: number;
  /** The hand-out orders of the current and next epochs, computed when first needed. */
  private orders = new Map<number, readonly number[]>();
  /** The job's fair share of the live trainers (see `setTrainerShare`). */
  private share: number | undefined;

  private constructor(
    snapshot: QueueSnapshot,
    private readonly options: TaskQueueOptions,
    private readonly clock: Clock,
  ) {
    this.s = snapshot;
    this.keptEpochs = options.keptEpochs ?? KEPT_EPOCHS;
  }

  /** A new job's queue: epoch 0, every task todo. */
  static create(init: NewQueue, options: TaskQueueOptions, clock: Clock = Date.now): TaskQueue {
    const tasks = Array.from({ length: init.taskCount }, (_, i) => freshTask(i));
    return new TaskQueue(
      {
        jobId: init.jobId,
        runId: init.runId,
        state: 'running',
        epoch: 0,
        startedAt: init.startedAt,
        samples: 0,
        dispatchSeq: 0,
        durationsMs: [],
        tasks,
        epochs: [{ epoch: 0, done: 0, discarded: 0, doneCounts: {} }],
      },
      options,
      clock,
    );
  }

  /**
   * A queue rebuilt from persisted state. Pending tasks get fresh deadlines, so the time they
   * spent while no master ran is not held against them: a claimed task at least one claim lease
   * (its trainer, if alive, renews the claim with this master within it), an unclaimed one a
   * task timeout.
   */
  static restore(snapshot: QueueSnapshot, options: TaskQueueOptions, clock: Clock = Date.now): TaskQueue {
    const queue = new TaskQueue(structuredClone(snapshot), options, clock);
    const unclaimed = clock() + queue.timeoutMs();
    for (const { tasks } of queue.open()) {
      for (const t of tasks)
        if (t.status === 'pending' && t.claimedBy === undefined) tasks[t.taskId] = { ...t, deadline: unclaimed };
    }
    queue.leaseClaims();
    queue.account(queue.s.epoch);
    if (queue.s.next !== undefined) queue.account(queue.s.epoch + 1);
    return queue;
  }

  /** A deep copy of the whole state. */
  snapshot(): QueueSnapshot {
    const copy = structuredClone(this.s);
    copy.epochs = this.accounting();
    return copy;
  }

  /** The job incarnation this queue belongs to. */
  get runId(): string {
    return this.s.runId;
  }

  get jobId(): string {
    return this.s.jobId;
  }

  get epoch(): number {
    return this.s.epoch;
  }

  get state(): QueueLifecycle {
    return this.s.state;
  }

  get reason(): StopReason | undefined {
    return this.s.reason;
  }

  get detail(): string | undefined {
    return this.s.detail;
  }

  /** Failed attempts to run the job so far. */
  get faults(): number {
    return this.s.faults ?? 0;
  }

  get startedAt(): number {
    return this.s.startedAt;
  }

  get stoppedAt(): number | undefined {
    return this.s.stoppedAt;
  }

  get samples(): number {
    return this.s.samples;
  }

  /** The current task timeout from the recent durations. */
  timeoutMs(): number {
    return taskTimeoutMs(this.options.timeout, this.s.durationsMs);
  }

  /** How long a claim holds unless renewed: the claim lease, or the task timeout when shorter. */
  claimLeaseMs(): number {
    return Math.min(this.options.claimLeaseMs ?? CLAIM_LEASE_MS, this.timeoutMs());
  }

  /** One task's state (a copy) in the current epoch, or in `epoch` when that is open. */
  task(taskId: number, epoch = this.s.epoch): TaskState | undefined {
    const t = this.tasksOf(epoch)?.[taskId];
    return t === undefined ? undefined : { ...t };
  }

  /** Task counters of the current epoch, or of `epoch` when that is open (else all zero). */
  counts(epoch = this.s.epoch): TaskCounts {
    const c: TaskCounts = { total: this.s.tasks.length, todo: 0, pending: 0, done: 0, discarded: 0 };
    for (const t of this.tasksOf(epoch) ?? []) c[t.status] += 1;
    return c;
  }

  /** The next epoch, when its tasks have started to go out while the current one ends. */
  get nextEpochOpen(): boolean {
    return this.s.next !== undefined;
  }

  /** Pending tasks that no trainer claimed yet (their messages wait in the stream), in both epochs. */
  unclaimedCount(): number {
    let n = 0;
    for (const t of this.pending()) if (t.task.claimedBy === undefined) n += 1;
    return n;
  }

  /** Accounting of recent epochs, oldest first; the totals of the open epochs are live. */
  accounting(): EpochAccounting[] {
    return this.s.epochs.map((e) => {
      const account = { ...e, doneCounts: { ...e.doneCounts } };
      if (this.tasksOf(e.epoch) !== undefined) {
        const c = this.counts(e.epoch);
        account.done = c.done;
        account.discarded = c.discarded;
      }
      return account;
    });
  }

  /**
   * The order in which an epoch (the current one by default) hands out its tasks: task ids by the
   * epoch's seeded permutation with `shuffleSeed`, else ascending. It depends only on the seed and
   * the epoch, so a master that restores the queue after a failover goes on in the same order.
   */
  dispatchOrder(epoch = this.s.epoch): readonly number[] {
    let taskIds = this.orders.get(epoch);
    if (taskIds === undefined) {
      const count = this.s.tasks.length;
      const { shuffleSeed } = this.options;
      taskIds =
        shuffleSeed === undefined
          ? Array.from({ length: count }, (_, i) => i)
          : epochTaskOrder(count, shuffleSeed, epoch);
      for (const known of this.orders.keys()) if (known < this.s.epoch) this.orders.delete(known);
      this.orders.set(epoch, taskIds);
    }
    return taskIds;
  }

  /**
   * Hands out up to `limit` todo tasks, the earliest in {@link dispatchOrder} first (so a task
   * that went back to todo is handed out again before the ones after it): each becomes pending
   * with a fresh dispatch id. The current epoch's go first; once it has none left, the next
   * epoch opens (within `maxEpochs`) and its tasks follow.
   */
  dispatch(limit: number): Transition<Dispatch[]> {
    if (this.s.state !== 'running' || limit < 1) return { result: [], change: null, events: [] };
    const change: QueueChange = { job: {}, tasks: [] };
    const dispatched = this.dispatchFrom(this.s.epoch, limit, change);
    if (dispatched.length < limit && this.mayOpenNext()) {
      const opening = this.s.next === undefined;
      if (opening) this.openNext();
      dispatched.push(...this.dispatchFrom(this.s.epoch + 1, limit - dispatched.length, change));
      // A next epoch is stored whole when it opens.
      if (opening) change.next = this.s.next!.map((t) => ({ ...t }));
    }
    if (dispatched.length === 0) return { result: [], change: null, events: [] };
    change.job.dispatchSeq = this.s.dispatchSeq;
    return { result: dispatched, change, events: [] };
  }

  /**
   * A trainer claims a task message it pulled. Granted when the dispatch is current (again for
   * the same trainer, so a retried claim or a renewal is harmless) for one claim lease from now,
   * while a renewal keeps the first claim's `claimedAt`, so the task's duration counts from it. Refused `stale`
   * for an old dispatch, `stopped` when the job stopped, `full` when `maxTrainers` other
   * trainers hold tasks (the task then returns to todo at once, with no failure).
   */
  claim(claim: Omit<TaskClaim, 'jobId'>): Transition<TaskClaimReply> {
    if (this.s.state !== 'running') return { result: { ok: false, reason: 'stopped' }, change: null, events: [] };
    const t = this.current(claim);
    if (t === undefined || (t.claimedBy !== undefined && t.claimedBy !== claim.trainerId)) {
      return { result: { ok: false, reason: 'stale' }, change: null, events: [] };
    }
    const change: QueueChange = { job: {}, tasks: [] };
    if (t.claimedBy === undefined && this.isFull(claim.trainerId)) {
      this.put(change, claim.epoch, settled(t, 'todo'));
      return { result: { ok: false, reason: 'full' }, change, events: [] };
    }
    const now = this.clock();
    const claimedAt = t.claimedBy === claim.trainerId ? (t.claimedAt ?? now) : now;
    const leaseMs = this.claimLeaseMs();
    const next = this.put(change, claim.epoch, {
      ...t,
      claimedBy: claim.trainerId,
      claimedAt,
      deadline: now + leaseMs,
    });
    return { result: { ok: true, deadlineMs: next.deadline!, leaseMs }, change, events: [] };
  }

  /**
   * A trainer's report. Ignored (`counted: false`) unless it names the task's current dispatch.
   * done: the task is done and counted once in its epoch's accounting; failed: one more failure,
   * back to todo or discarded; returned: back to todo with no failure. The epoch may end here.
   */
  report(report: Omit<TaskReport, 'jobId'>): Transition<TaskReportReply> {
    const ignored: Transition<TaskReportReply> = { result: { ok: true, counted: false }, change: null, events: [] };
    if (this.s.state !== 'running') return ignored;
    const t = this.current(report);
    if (t === undefined) return ignored;
    const { epoch } = report;
    const now = this.clock();
    const change: QueueChange = { job: {}, tasks: [] };
    const events: JobEventInput[] = [];
    if (report.outcome === 'done') {
      const started = t.claimedAt ?? t.dispatchedAt ?? now;
      const next = settled(t, 'done');
      delete next.lastError;
      this.put(change, epoch, next);
      this.s.durationsMs = recordDuration(this.s.durationsMs, now - started, this.options.timeout.window);
      const samples =
        report.samples !== undefined && Number.isFinite(report.samples) && report.samples > 0 ? report.samples : 0;
      this.s.samples += samples;
      const account = this.account(epoch);
      account.doneCounts[String(t.taskId)] = (account.doneCounts[String(t.taskId)] ?? 0) + 1;
      change.job.durationsMs = this.s.durationsMs;
      change.job.samples = this.s.samples;
      change.counted = { epoch, taskId: t.taskId, durationMs: Math.max(0, now - started) };
    } else if (report.outcome === 'failed') {
      this.fail(change, epoch, t, report.error ?? 'failed', events);
    } else {
      this.put(change, epoch, settled(t, 'todo'));
    }
    this.endEpochIfDone(change, events);
    return { result: { ok: true, counted: true }, change, events };
  }

  /**
   * Scans deadlines, in both open epochs. A claimed task past its deadline means its trainer is
   * gone (a live trainer renews every claim it holds): the task it claimed first, the one it was
   * working on, counts a failure (event task-retried with error `timeout`, or task-discarded),
   * and the others it held, claimed ahead and never started, go back to todo at once with no
   * failure. A dispatched task nobody claimed in time (its message was lost, or its puller died
   * before claiming) goes back to todo with no failure. Also stops the job once `maxSeconds`
   * passed. The epoch may end here.
   */
  expire(): Transition<number> {
    if (this.s.state !== 'running') return { result: 0, change: null, events: [] };
    const now = this.clock();
    const change: QueueChange = { job: {}, tasks: [] };
    const events: JobEventInput[] = [];
    let expired = 0;
    const gone = new Set<string>();
    for (const { epoch, task: t } of this.pending()) {
      if (t.deadline === undefined || t.deadline > now) continue;
      expired += 1;
      if (t.claimedBy === undefined) this.put(change, epoch, settled(t, 'todo'));
      else gone.add(t.claimedBy);
    }
    for (const trainerId of gone) {
      const held = this.pending()
        .filter(({ task: t }) => t.claimedBy === trainerId)
        .sort(
          (a, b) =>
            (a.task.claimedAt ?? 0) - (b.task.claimedAt ?? 0) || a.epoch - b.epoch || a.task.taskId - b.task.taskId,
        );
      const [working, ...ahead] = held;
      this.fail(change, working!.epoch, working!.task, TIMEOUT_ERROR, events);
      for (const { epoch, task } of ahead) this.put(change, epoch, settled(task, 'todo'));
    }
    const outOfTime = timeBudgetSpent(this.options, this.s.startedAt, now);
    if (outOfTime !== undefined) {
      this.stopInto(change, events, outOfTime.reason, outOfTime.detail);
      return { result: expired, change, events };
    }
    if (expired === 0) return { result: 0, change: null, events: [] };
    this.endEpochIfDone(change, events);
    return { result: expired, change, events };
  }

  /**
   * Gives every claimed task at least one claim lease from now, as a failover does: for when
   * the master could not hear renewals for a while (its NATS connection was away), so that
   * trainers alive all along do not lose their tasks.
   */
  rearmClaims(): Transition<number> {
    if (this.s.state !== 'running') return { result: 0, change: null, events: [] };
    const change = this.leaseClaims();
    const moved = change.tasks.length + (change.next?.length ?? 0);
    if (moved === 0) return { result: 0, change: null, events: [] };
    return { result: moved, change, events: [] };
  }

  /** Moves every claimed task's deadline to at least one claim lease from now; returns the change. */
  private leaseClaims(): QueueChange {
    const deadline = this.clock() + this.claimLeaseMs();
    const change: QueueChange = { job: {}, tasks: [] };
    for (const { epoch, task: t } of this.pending()) {
      if (t.claimedBy === undefined || (t.deadline ?? 0) >= deadline) continue;
      this.put(change, epoch, { ...t, deadline });
    }
    return change;
  }

  /** Stops the job (first stop wins; a stopped job ignores later ones and returns false). */
  stop(reason: StopReason, detail?: string): Transition<boolean> {
    if (this.s.state !== 'running') return { result: false, change: null, events: [] };
    const change: QueueChange = { job: {}, tasks: [] };
    const events: JobEventInput[] = [];
    this.stopInto(change, events, reason, detail);
    return { result: true, change, events };
  }

  /**
   * A trainer or the evaluator could not set the job up (its model cannot be built, its data
   * read or scored). The job fails, with the cause in its `failed` event and its `detail`, once
   * `maxJobFaults` attempts have failed; a job that no longer runs ignores the report (false).
   */
  fault(source: string, error: string): Transition<boolean> {
    if (this.s.state !== 'running') return { result: false, change: null, events: [] };
    const faults = this.faults + 1;
    this.s.faults = faults;
    const change: QueueChange = { job: { faults }, tasks: [] };
    const events: JobEventInput[] = [];
    const max = this.options.maxJobFaults ?? MAX_JOB_FAULTS;
    if (faults >= max)
      this.failInto(change, events, `${faults} attempts to run it failed; the last (${source}): ${error}`);
    return { result: true, change, events };
  }

  /**
   * Sets the job's fair share of the live trainers: a claim from a trainer beyond it (and
   * beyond `maxTrainers`) is refused `full`, so that trainer serves another job. Undefined: no share.
   */
  setTrainerShare(share: number | undefined): void {
    this.share = share;
  }

  /** Most trainers the job may have at work now: `maxTrainers`, capped by its share. */
  trainerLimit(): number | undefined {
    const max = this.options.maxTrainers;
    if (this.share === undefined) return max;
    return max === undefined ? this.share : Math.min(max, this.share);
  }

  /** The task list of an open epoch: the current one, or the next once it opened. */
  private tasksOf(epoch: number): TaskState[] | undefined {
    if (epoch === this.s.epoch) return this.s.tasks;
    return epoch === this.s.epoch + 1 ? this.s.next : undefined;
  }

  /** The open epochs with their tasks, the current one first. */
  private open(): { epoch: number; tasks: TaskState[] }[] {
    const open = [{ epoch: this.s.epoch, tasks: this.s.tasks }];
    if (this.s.next !== undefined) open.push({ epoch: this.s.epoch + 1, tasks: this.s.next });
    return open;
  }

  /** Every pending task of the open epochs, with its epoch. */
  private pending(): { epoch: number; task: TaskState }[] {
    const out: { epoch: number; task: TaskState }[] = [];
    for (const { epoch, tasks } of this.open()) {
      for (const task of tasks) if (task.status === 'pending') out.push({ epoch, task });
    }
    return out;
  }

  /** Sets a task's new state in an open epoch and records it in `change`; returns it. */
  private put(change: QueueChange, epoch: number, task: TaskState): TaskState {
    this.tasksOf(epoch)![task.taskId] = task;
    if (epoch === this.s.epoch) change.tasks.push(task);
    else (change.next ??= []).push(task);
    return task;
  }

  /** Hands out up to `limit` todo tasks of an open epoch, in its order. */
  private dispatchFrom(epoch: number, limit: number, change: QueueChange): Dispatch[] {
    const tasks = this.tasksOf(epoch)!;
    const now = this.clock();
    const deadline = now + this.timeoutMs();
    const dispatched: Dispatch[] = [];
    for (const taskId of this.dispatchOrder(epoch)) {
      if (dispatched.length >= limit) break;
      const t = tasks[taskId]!;
      if (t.status !== 'todo') continue;
      this.s.dispatchSeq += 1;
      const dispatchId = `${this.s.runId}.${this.s.dispatchSeq}`;
      this.put(change, epoch, { ...settled(t, 'pending'), dispatchId, dispatchedAt: now, deadline });
      dispatched.push({ taskId, epoch, dispatchId, deadline });
    }
    return dispatched;
  }

  /**
   * Whether the next epoch's tasks may go out: the current epoch has none left to hand out, and
   * the epoch budget leaves room for the next.
   */
  private mayOpenNext(): boolean {
    if (this.s.tasks.length === 0 || this.s.tasks.some((t) => t.status === 'todo')) return false;
    return epochBudgetSpent(this.options, this.s.epoch + 1) === undefined;
  }

  /** Opens the next epoch, every task todo. */
  private openNext(): void {
    this.s.next = this.s.tasks.map((t) => freshTask(t.taskId));
    this.account(this.s.epoch + 1);
  }

  private isFull(trainerId: string): boolean {
    const limit = this.trainerLimit();
    if (limit === undefined) return false;
    const holders = new Set<string>();
    for (const { task } of this.pending()) if (task.claimedBy !== undefined) holders.add(task.claimedBy);
    return !holders.has(trainerId) && holders.size >= limit;
  }

  /** The task a claim or report names, when its epoch is open and it is pending in that dispatch. */
  private current(ref: { taskId: number; epoch: number; dispatchId: string }): TaskState | undefined {
    if (!Number.isInteger(ref.taskId)) return undefined;
    const t = this.tasksOf(ref.epoch)?.[ref.taskId];
    if (t === undefined || t.status !== 'pending' || t.dispatchId !== ref.dispatchId) return undefined;
    return t;
  }

  /** One more failure: back to todo, or discarded past `maxTaskFailures`. */
  private fail(change: QueueChange, epoch: number, t: TaskState, error: string, events: JobEventInput[]): void {
    const failures = t.failures + 1;
    const discard = failures > this.options.maxTaskFailures;
    this.put(change, epoch, settled(t, discard ? 'discarded' : 'todo', { failures, lastError: error }));
    events.push({
      type: discard ? 'task-discarded' : 'task-retried',
      jobId: this.s.jobId,
      epoch,
      taskId: t.taskId,
      failures,
      error,
    });
  }

  /** The accounting of an epoch, added (after the ones before it) when missing. */
  private account(epoch: number): EpochAccounting {
    let account = this.s.epochs.find((e) => e.epoch === epoch);
    if (account === undefined) {
      account = { epoch, done: 0, discarded: 0, doneCounts: {} };
      this.s.epochs.push(account);
      this.s.epochs.sort((a, b) => a.epoch - b.epoch);
    }
    return account;
  }

  /**
   * Ends the epoch when every task of it is done or discarded: the summary is kept, the counter
   * moves on, and the next epoch's tasks (or every task afresh, when it had not opened) become
   * the current ones; if those are all settled already, that epoch ends too. Reaching `maxEpochs`
   * stops the job in the same change.
   */
  private endEpochIfDone(change: QueueChange, events: JobEventInput[]): void {
    while (this.s.state === 'running') {
      const c = this.counts();
      if (c.todo > 0 || c.pending > 0) return;
      this.endEpoch(change, events, c);
    }
  }

  private endEpoch(change: QueueChange, events: JobEventInput[], c: TaskCounts): void {
    const account = this.account(this.s.epoch);
    account.done = c.done;
    account.discarded = c.discarded;
    (change.closedEpochs ??= []).push({ epoch: this.s.epoch, done: c.done, discarded: c.discarded });
    const barren = c.done === 0 && this.s.tasks.every((t) => t.status === 'discarded' && t.lastError !== TIMEOUT_ERROR);
    const lastError = this.s.tasks.at(-1)?.lastError;
    this.s.epoch += 1;
    this.s.tasks = this.s.next ?? this.s.tasks.map((t) => freshTask(t.taskId));
    delete this.s.next;
    this.account(this.s.epoch);
    this.s.epochs = this.s.epochs.slice(-this.keptEpochs);
    change.job.epoch = this.s.epoch;
    change.tasks = this.s.tasks.map((t) => ({ ...t }));
    change.dropNext = true;
    delete change.next;
    events.push({
      type: 'epoch',
      jobId: this.s.jobId,
      epoch: this.s.epoch,
      done: c.done,
      discarded: c.discarded,
      doneCounts: { ...account.doneCounts },
    });
    if (barren && this.options.failBarrenEpochs === true) {
      // Not one task could be trained on: another epoch would fail the same way.
      this.failInto(
        change,
        events,
        `epoch ${this.s.epoch - 1}: all ${c.discarded} tasks were discarded${lastError ? `; the last error: ${lastError}` : ''}`,
      );
      return;
    }
    const outOfEpochs = epochBudgetSpent(this.options, this.s.epoch);
    if (outOfEpochs !== undefined) this.stopInto(change, events, outOfEpochs.reason, outOfEpochs.detail);
  }

  /** Ends the job as failed: no more tasks go out, and the event names the cause. */
  private failInto(change: QueueChange, events: JobEventInput[], error: string): void {
    this.s.state = 'failed';
    this.s.detail = error;
    this.s.stoppedAt = this.clock();
    change.job.state = 'failed';
    change.job.detail = error;
    change.job.stoppedAt = this.s.stoppedAt;
    events.push({ type: 'failed', jobId: this.s.jobId, error });
  }

  private stopInto(change: QueueChange, events: JobEventInput[], reason: StopReason, detail: string | undefined): void {
    this.s.state = 'stopped';
    this.s.reason = reason;
    this.s.stoppedAt = this.clock();
    change.job.state = 'stopped';
    change.job.reason = reason;
    change.job.stoppedAt = this.s.stoppedAt;
    if (detail !== undefined) {
      this.s.detail = detail;
      change.job.detail = detail;
    }
    events.push({ type: 'stopped', jobId: this.s.jobId, reason, ...(detail !== undefined ? { detail } : {}) });
  }
}
