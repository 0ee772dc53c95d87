import type { Batch, Learner } from '#libs/learner';
import type { ClaimedTask } from '#libs/master-client';
import { PserverTimeoutError, ShardCallError, type ShardedPserverClient } from '#libs/pserver-client';
import type { TrainingMode } from '#libs/job-spec';
import { PSERVER_RETRY_BACKOFF_MS, PSERVER_RETRY_MAX_BACKOFF_MS, PULL_WAIT_MS } from './defaults.js';
import { InterruptedError, sleep, unlessAborted } from './abort-race.js';
import { GradientRetriesExhaustedError } from './errors.js';
import type { MinibatchReader } from './minibatch-reader.js';

/** The calls the training loop makes on the parameter servers (a `ShardedPserverClient`). */
export type ParameterService = Pick<ShardedPserverClient, 'pushGradients' | 'pullParams'>;

/** How a task ended. */
export type TaskOutcome =
  | { kind: 'done'; samples: number }
  | { kind: 'failed'; samples: number; error: string; cause: unknown }
  /** Preempted: the current minibatch was finished; the task goes back to the master. */
  | { kind: 'returned'; samples: number }
  /** The job stopped: the task is dropped without a report. */
  | { kind: 'abandoned'; samples: number };

/** Signals that end a task early. */
export interface TaskSignals {
  /** The job stopped: abandon the task. */
  stop: AbortSignal;
  /** The trainer is being preempted: finish the minibatch, then hand the task back. */
  preempt: AbortSignal;
}

/** Settings of a `TrainingLoop`. */
export interface TrainingLoopOptions {
  mode: TrainingMode;
  /** Recomputations of a refused minibatch before the task fails. */
  maxGradientRetries: number;
  /** How long one pull waits for the version it needs before asking again. */
  pullWaitMs?: number;
  /** First pause after a push that failed outright (not a stale refusal). */
  retryBackoffMs?: number;
  /** Called after each minibatch the parameter servers took. */
  onMinibatch?: (samples: number, versions: readonly number[]) => void;
  /** Called when a pull had to wait longer than `pullWaitMs`, and before each retry of a failed push. */
  onWait?: (message: string) => void;
}

/** What one minibatch came to. */
type StepResult = 'pushed' | 'interrupted';

function sameVersions(a: readonly number[] | undefined, b: readonly number[]): boolean {
  return a !== undefined && a.length === b.length && a.every((v, i) => v === b[i]);
}

/**
 * Synchronous (or asynchronous) SGD on one trainer: for each minibatch, make sure the learner
 * holds parameters at least as new as needed, train, push the update; a push refused as stale
 * refreshes the parameters and recomputes the same minibatch, up to `maxGradientRetries` times.
 *
 * Parameters are pulled again only when the versions the learner holds are not enough: after a
 * synchronous push the next minibatch needs the step that push was part of (version + 1), after
 * an asynchronous push the version the push produced, after a refusal the version that refused it.
 */
export class TrainingLoop {
  /** Shard versions of the parameters the learner holds; undefined before the first pull. */
  private held: number[] | undefined;
  /** Shard versions the next minibatch needs at least. */
  private needed: number[] | number = 0;

  constructor(
    private readonly learner: Learner,
    private readonly params: ParameterService,
    private readonly options: TrainingLoopOptions,
  ) {}

  /** Shard versions of the parameters the learner holds (empty before the first pull). */
  get versions(): readonly number[] {
    return this.held ?? [];
  }

  /** Trains on every minibatch of a task and says how it ended; never throws. */
  async runTask(task: ClaimedTask, reader: MinibatchReader, signals: TaskSignals): Promise<TaskOutcome> {
    const either = AbortSignal.any([signals.stop, signals.preempt]);
    let samples = 0;
    try {
      // Signals are looked at before each minibatch, so a preempted task whose last minibatch
      // was pushed is reported done rather than handed back.
      for await (const batch of reader.batches(task.chunks)) {
        if (signals.stop.aborted) return { kind: 'abandoned', samples };
        if (signals.preempt.aborted) return { kind: 'returned', samples };
        if ((await this.trainMinibatch(batch, either)) === 'interrupted') {
          return signals.stop.aborted ? { kind: 'abandoned', samples } : { kind: 'returned', samples };
        }
        samples += batch.size;
      }
    } catch (err) {
      if (signals.stop.aborted) return { kind: 'abandoned', samples };
      return { kind: 'failed', samples, error: (err as Error).message ?? String(err), cause: err };
    }
    if (signals.stop.aborted) return { kind: 'abandoned', samples };
    return { kind: 'done', samples };
  }

  /**
   * Trains on one minibatch until the parameter servers take its update. Returns `interrupted`
   * when the signal fired while waiting for parameters (nothing was pushed).
   * @throws GradientRetriesExhaustedError after too many refusals; pserver errors otherwise.
   */
  async trainMinibatch(batch: Batch, signal: AbortSignal): Promise<StepResult> {
    const { maxGradientRetries } = this.options;
    let refusals = 0;
    let backoffMs = this.options.retryBackoffMs ?? PSERVER_RETRY_BACKOFF_MS;
    for (;;) {
      try {
        await this.refresh(signal);
      } catch (err) {
        if (err instanceof InterruptedError) return 'interrupted';
        throw err;
      }
      await this.learner.train(batch);
      const update = this.learner.getUpdate();
      const held = this.held!;
      let outcome;
      try {
        outcome = await this.params.pushGradients(held, batch.size, update);
      } catch (err) {
        if (!(err instanceof ShardCallError)) throw err;
        refusals += 1;
        if (refusals > maxGradientRetries)
          throw new GradientRetriesExhaustedError(refusals, maxGradientRetries, { cause: err });
        this.options.onWait?.(`push failed (${err.message}); retrying in ${backoffMs} ms`);
        await sleep(backoffMs, signal);
        backoffMs = Math.min(PSERVER_RETRY_MAX_BACKOFF_MS, backoffMs * 2);
        this.needed = held;
        this.held = undefined;
        continue;
      }
      if (outcome.stale.length === 0) {
        this.needed =
          this.options.mode === 'sync'
            ? held.map((v, k) => Math.max(v + 1, outcome.versions[k] ?? 0))
            : held.map((v, k) => Math.max(v, outcome.versions[k] ?? 0));
        this.options.onMinibatch?.(batch.size, held);
        return 'pushed';
      }
      refusals += 1;
      if (refusals > maxGradientRetries) {
        throw new GradientRetriesExhaustedError(refusals, maxGradientRetries, { cause: outcome.stale[0] });
      }
      this.needed = held.map((v, k) => Math.max(v, outcome.versions[k] ?? 0));
    }
  }

  /** Pulls parameters when the held ones are older than needed; loads them if they moved. */
  private async refresh(signal: AbortSignal): Promise<void> {
    const needed = this.needed;
    if (this.held !== undefined && typeof needed !== 'number' && needed.every((v, k) => v <= (this.held![k] ?? -1)))
      return;
    const waitMs = this.options.pullWaitMs ?? PULL_WAIT_MS;
    for (;;) {
      if (signal.aborted) throw new InterruptedError();
      let pulled;
      try {
        pulled = await unlessAborted(this.params.pullParams(needed, { waitMs }), signal);
      } catch (err) {
        if (
          err instanceof ShardCallError &&
          err.errors.every((e) => e === undefined || e instanceof PserverTimeoutError)
        ) {
          this.options.onWait?.(`still waiting for parameter version ${JSON.stringify(needed)}`);
          continue;
        }
        throw err;
      }
      if (!sameVersions(this.held, pulled.versions)) {
        this.learner.setParams(pulled.tensors);
        this.held = [...pulled.versions];
      }
      return;
    }
  }
}
