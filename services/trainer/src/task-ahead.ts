import type { ClaimedTask, TaskPull } from '#libs/master-client';
import type { TaskData } from './minibatch-reader.js';
import type { TaskLease } from './task-lease.js';

/**
 * Counts down the minibatches of the task in hand and fires `onNearEnd` once, when the next task
 * should be claimed: when at most one minibatch is left, or when those left would take at most
 * `leadMs` at the pace of the last one. A task's size is known from its chunks' record counts.
 */
export class TaskCountdown {
  private samplesLeft: number;
  private lastAt: number;
  private fired = false;

  constructor(
    task: Pick<TaskData, 'chunks'>,
    private readonly batchSize: number,
    private readonly leadMs: number,
    private readonly onNearEnd: () => void,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.samplesLeft = task.chunks.reduce((sum, c) => sum + c.numRecords, 0);
    this.lastAt = now();
  }

  /** One more minibatch of `samples` examples was trained on and pushed. */
  minibatch(samples: number): void {
    const now = this.now();
    const stepMs = now - this.lastAt;
    this.lastAt = now;
    this.samplesLeft = Math.max(0, this.samplesLeft - samples);
    if (this.fired) return;
    const stepsLeft = Math.ceil(this.samplesLeft / this.batchSize);
    if (stepsLeft <= 1 || stepsLeft * stepMs <= this.leadMs) {
      this.fired = true;
      this.onNearEnd();
    }
  }
}

/** A task claimed ahead, with the lease that has renewed its claim since it was granted. */
export interface HeldTask {
  task: ClaimedTask;
  lease: TaskLease;
}

/** What `TaskAhead.take` gives: a claimed task with its lease, or why none came. */
export type AheadPull = HeldTask | Extract<TaskPull, { kind: 'none' }>;

/** What a `TaskAhead` needs. */
export interface TaskAheadDeps {
  /** Pulls and claims the next task (a `MasterClient.pullTask`), giving up when `signal` fires. */
  pull: (signal: AbortSignal) => Promise<TaskPull>;
  /** Starts renewing the claim of a task as soon as it is granted. */
  lease: (task: ClaimedTask) => TaskLease;
  /** Told of the task once it is claimed (to read its first chunk ahead). */
  onClaimed?: (task: ClaimedTask) => void;
}

/**
 * The next task, pulled and claimed while the task in hand finishes its last minibatches (the way
 * PaddlePaddle's master client buffers tasks), so the trainer goes on to it without waiting for
 * the master. Its claim is renewed from the moment it is granted, so a task in hand that takes
 * long to finish (the parameter servers restarting) does not let it time out. A pull that came
 * back empty before it was needed is not used: the caller asks again, and its idle wait counts
 * from then.
 */
export class TaskAhead {
  private readonly controller = new AbortController();
  private readonly pulling: Promise<AheadPull>;
  private early: AheadPull | undefined;

  constructor(deps: TaskAheadDeps) {
    this.pulling = deps.pull(this.controller.signal).then((pulled) => {
      if (pulled.kind !== 'claimed') return pulled;
      deps.onClaimed?.(pulled.task);
      return { task: pulled.task, lease: deps.lease(pulled.task) };
    });
    this.pulling.then(
      (pulled) => (this.early = pulled),
      () => undefined,
    );
  }

  /** True once the pull has come back with a claimed task. */
  get holdsTask(): boolean {
    return this.early !== undefined && 'task' in this.early;
  }

  /**
   * The task claimed ahead, waiting for the pull if it is still on its way; `undefined` when the
   * pull already came back without a task (the caller pulls again).
   */
  async take(): Promise<AheadPull | undefined> {
    if (this.early !== undefined && !('task' in this.early)) return undefined;
    return this.pulling;
  }

  /**
   * Gives the pull up: one on its way stops waiting (a task it pulls from now on is handed back
   * by the pull itself). Resolves with the task it had claimed, if any, whose lease the caller
   * ends once it has handed the task back.
   */
  async cancel(): Promise<HeldTask | undefined> {
    this.controller.abort();
    const pulled = await this.pulling.catch(() => undefined);
    return pulled !== undefined && 'task' in pulled ? pulled : undefined;
  }
}
