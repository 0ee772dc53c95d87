import type { Batch, Learner, PlainTensor } from '#libs/learner';
import type { ClaimedTask } from '#libs/master-client';
import {
  PserverTimeoutError,
  ShardCallError,
  type PulledParams,
  type PushOutcome,
  type ShardedPserverClient,
} from '#libs/pserver-client';
import type { TrainingMode } from '#libs/job-spec';
import { sleep } from '#libs/retry';
import { PULL_WAIT_MS } from './defaults.js';
import { InterruptedError, unlessAborted } from './abort-race.js';
import { GradientRetriesExhaustedError } from './errors.js';
import { clipGradients, type GradientClipping } from './gradient-clipping.js';
import type { MinibatchReader } from './minibatch-reader.js';
import { PserverOutage, failedShards, isTransientPserverFailure } from './pserver-outage.js';
import { StepPhases } from './step-phases.js';

/**
 * The calls the training loop makes on the parameter servers (a `ShardedPserverClient`). With
 * `pushPull`, each push brings back the parameters of the next minibatch in the same call.
 */
export type ParameterService = Pick<ShardedPserverClient, 'pushGradients' | 'pullParams' | 'status'> &
  Partial<Pick<ShardedPserverClient, 'pushPull'>>;

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
  /** How each update is clipped before it is pushed (`optimizer.clipNorm`, `clipValue`); absent: not at all. */
  clipping?: GradientClipping;
  /** How long one pull waits for the version it needs before asking again. */
  pullWaitMs?: number;
  /** First pause after a call the parameter servers did not answer (not a stale refusal). */
  retryBackoffMs?: number;
  /** How long the parameter servers may stay unreachable before the task fails. */
  outageBudgetMs?: number;
  /** Called after each minibatch the parameter servers took. */
  onMinibatch?: (samples: number, versions: readonly number[]) => void;
  /** Called when a pull had to wait longer than `pullWaitMs`, and before each retry of a failed call. */
  onWait?: (message: string) => void;
  /**
   * Called when the parameter servers answer again after an outage, before training goes on: a
   * shard that restarted has forgotten its quorum, so the trainer joins it again here.
   */
  onReconnect?: () => Promise<void> | void;
  /** Where the phases of each step are timed; a private one when not given. */
  phases?: StepPhases;
}

/** What one minibatch came to. */
type StepResult = 'pushed' | 'interrupted';

function sameVersions(a: readonly number[] | undefined, b: readonly number[]): boolean {
  return a !== undefined && a.length === b.length && a.every((v, i) => v === b[i]);
}

/** One version for every shard: the shards step together, so a pull should not mix steps. */
function uniform(versions: number | readonly number[]): boolean {
  return typeof versions === 'number' || versions.every((v) => v === versions[0]);
}

/**
 * Synchronous (or asynchronous) SGD on one trainer: for each minibatch, make sure the learner
 * holds parameters at least as new as needed, train, push the update; a push refused as stale
 * refreshes the parameters and recomputes the same minibatch, up to `maxGradientRetries` times.
 *
 * Parameters are pulled again only when the versions the learner holds are not enough: after a
 * synchronous push the next minibatch needs the step that push was part of (version + 1), after
 * an asynchronous push the version the push produced, after a refusal the version that refused it.
 *
 * Parameter servers that are briefly away (restarting, shutting down) are waited for with
 * doubling pauses, up to `outageBudgetMs`; then the parameters of the shards that were away are
 * taken as they are. A shard that came back at an older version than this trainer knew (it
 * resumed from its last checkpoint) is followed down to that version instead of waited for.
 */
export class TrainingLoop {
  /** Shard versions of the parameters the learner holds; undefined when they must be pulled. */
  private held: number[] | undefined;
  /** Shard versions the next minibatch needs at least. */
  private needed: number[] | number = 0;
  private readonly outage: PserverOutage;
  private readonly phases: StepPhases;

  constructor(
    private readonly learner: Learner,
    private readonly params: ParameterService,
    private readonly options: TrainingLoopOptions,
  ) {
    this.outage = new PserverOutage({ budgetMs: options.outageBudgetMs, initialBackoffMs: options.retryBackoffMs });
    this.phases = options.phases ?? new StepPhases();
  }

  /** Shard versions of the parameters the learner holds (empty before the first pull). */
  get versions(): readonly number[] {
    return this.held ?? [];
  }

  /**
   * Trains on every minibatch of a task and says how it ended; never throws. The next minibatch
   * is read while the current one trains and is pushed, so reading waits on the disk at most
   * once per chunk.
   */
  async runTask(task: ClaimedTask, reader: MinibatchReader, signals: TaskSignals): Promise<TaskOutcome> {
    const either = AbortSignal.any([signals.stop, signals.preempt]);
    const batches = reader.batches(task.chunks);
    let samples = 0;
    this.phases.pause();
    try {
      let next = batches.next();
      for (;;) {
        const item = await this.phases.time('decode', () => next);
        if (item.done) break;
        const batch = item.value;
        // Signals are looked at before each minibatch, so a preempted task whose last minibatch
        // was pushed is reported done rather than handed back.
        if (signals.stop.aborted) return { kind: 'abandoned', samples };
        if (signals.preempt.aborted) return { kind: 'returned', samples };
        next = batches.next();
        // A read that fails is reported when its minibatch is reached, not while this one trains.
        next.catch(() => undefined);
        if ((await this.trainMinibatch(batch, either)) === 'interrupted') {
          return signals.stop.aborted ? { kind: 'abandoned', samples } : { kind: 'returned', samples };
        }
        samples += batch.size;
      }
    } catch (err) {
      if (signals.stop.aborted) return { kind: 'abandoned', samples };
      return { kind: 'failed', samples, error: (err as Error).message ?? String(err), cause: err };
    } finally {
      await batches.return(undefined).catch(() => undefined);
    }
    if (signals.stop.aborted) return { kind: 'abandoned', samples };
    return { kind: 'done', samples };
  }

  /**
   * Trains on one minibatch until the parameter servers take its update. Returns `interrupted`
   * when the signal fired while waiting for parameters or for the parameter servers (nothing
   * was pushed).
   * @throws GradientRetriesExhaustedError after too many refusals; PserverOutageError when the
   * parameter servers stayed away too long; other pserver errors as they come.
   */
  async trainMinibatch(batch: Batch, signal: AbortSignal): Promise<StepResult> {
    const { maxGradientRetries } = this.options;
    let refusals = 0;
    for (;;) {
      try {
        await this.refresh(signal);
      } catch (err) {
        if (err instanceof InterruptedError) return 'interrupted';
        throw err;
      }
      await this.phases.time('train', () => this.learner.train(batch));
      const update = clipGradients(
        await this.phases.time('getUpdate', () => this.learner.getUpdate()),
        this.options.clipping,
      );
      const held = this.held!;
      let outcome: PushOutcome & { params?: PulledParams };
      try {
        outcome = await this.phases.time('push', () => this.push(held, batch.size, update, signal));
      } catch (err) {
        if (!isTransientPserverFailure(err)) throw err;
        await this.pause(err, signal);
        if (signal.aborted) return 'interrupted';
        // Whether the shards that were away took the push is unknown: their parameters are
        // taken as they are once they answer, and the minibatch is recomputed.
        const failed = failedShards(err);
        this.needed = held.map((v, k) => (failed.has(k) ? 0 : v));
        this.held = undefined;
        continue;
      }
      await this.reconnected();
      if (outcome.stale.length === 0) {
        this.needed =
          this.options.mode === 'sync'
            ? held.map((v, k) => Math.max(v + 1, outcome.versions[k] ?? 0))
            : held.map((v, k) => Math.max(v, outcome.versions[k] ?? 0));
        const next = outcome.params;
        if (next && this.needed.every((v, k) => v <= (next.versions[k] ?? -1))) {
          this.phases.timeSync('load', () => this.learner.setParams(next.tensors));
          this.held = [...next.versions];
        }
        this.phases.endStep();
        this.options.onMinibatch?.(batch.size, held);
        return 'pushed';
      }
      const staleShards = new Set(outcome.stale.map((e) => e.shard));
      // A shard behind the version this push was computed from restarted from an older
      // checkpoint: follow it down (not the trainer's fault, so no refusal is counted).
      const behind = held.map((v, k) => staleShards.has(k) && (outcome.versions[k] ?? v) < v);
      if (behind.some((b) => b)) {
        this.options.onWait?.(
          `shard(s) ${behind.flatMap((b, k) => (b ? [k] : [])).join(', ')} went back to version(s) ` +
            `${behind.flatMap((b, k) => (b ? [outcome.versions[k]] : [])).join(', ')}; following`,
        );
        this.needed = held.map((v, k) => (behind[k] ? outcome.versions[k]! : Math.max(v, outcome.versions[k] ?? 0)));
        this.held = undefined;
        continue;
      }
      refusals += 1;
      if (refusals > maxGradientRetries) {
        throw new GradientRetriesExhaustedError(refusals, maxGradientRetries, { cause: outcome.stale[0] });
      }
      this.needed = held.map((v, k) => Math.max(v, outcome.versions[k] ?? 0));
    }
  }

  /** Pushes an update, bringing back the next parameters in the same call where the service can. */
  private push(
    held: readonly number[],
    samples: number,
    update: PlainTensor[],
    signal: AbortSignal,
  ): Promise<PushOutcome & { params?: PulledParams }> {
    if (this.params.pushPull === undefined) return this.params.pushGradients(held, samples, update, { signal });
    return this.params.pushPull(held, samples, update, {
      signal,
      waitMs: this.options.pullWaitMs ?? PULL_WAIT_MS,
      sameVersion: this.options.mode === 'sync',
    });
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
        pulled = await this.phases.time('wait', () =>
          unlessAborted(
            this.params.pullParams(this.needed, { waitMs, sameVersion: uniform(this.needed), signal }),
            signal,
          ),
        );
      } catch (err) {
        if (err instanceof InterruptedError) throw err;
        if (
          err instanceof ShardCallError &&
          err.errors.every((e) => e === undefined || e instanceof PserverTimeoutError)
        ) {
          this.options.onWait?.(`still waiting for parameter version ${JSON.stringify(this.needed)}`);
          await this.followRestartedShards();
          continue;
        }
        if (!isTransientPserverFailure(err)) throw err;
        await this.pause(err, signal);
        const failed = failedShards(err);
        const current = this.needed;
        if (typeof current !== 'number') this.needed = current.map((v, k) => (failed.has(k) ? 0 : v));
        continue;
      }
      await this.reconnected();
      if (!sameVersions(this.held, pulled.versions)) {
        this.phases.timeSync('load', () => this.learner.setParams(pulled.tensors));
        this.held = [...pulled.versions];
      }
      return;
    }
  }

  /**
   * After a pull ran out of time: a shard whose version is below what this trainer waits for
   * (below the step in progress, in synchronous mode) came back from a restart at an older
   * checkpoint and will never reach it; wait for its current version instead.
   */
  private async followRestartedShards(): Promise<void> {
    const needed = this.needed;
    if (typeof needed === 'number') return;
    let versions: (number | undefined)[];
    try {
      const replies = await this.params.status();
      versions = replies.map((r) => r.jobs[0]?.version);
    } catch {
      // The next pull says what is wrong.
      return;
    }
    const slack = this.options.mode === 'sync' ? 1 : 0;
    const behind = needed.map((v, k) => versions[k] !== undefined && versions[k] < v - slack);
    if (!behind.some((b) => b)) return;
    this.options.onWait?.(
      `shard(s) ${behind.flatMap((b, k) => (b ? [k] : [])).join(', ')} went back to version(s) ` +
        `${behind.flatMap((b, k) => (b ? [versions[k]] : [])).join(', ')}; following`,
    );
    this.needed = needed.map((v, k) => (behind[k] ? versions[k]! : v));
  }

  /**
   * Notes a call the parameter servers did not answer and waits before the next try.
   * @throws PserverOutageError once they have been away longer than the budget.
   */
  private async pause(err: Error, signal: AbortSignal): Promise<void> {
    const pauseMs = this.outage.failed(err);
    this.options.onWait?.(`parameter servers unavailable (${err.message}); retrying in ${pauseMs} ms`);
    await sleep(pauseMs, signal, { ref: false });
  }

  /** Notes a call that went through; after an outage, lets the caller join the quorum again. */
  private async reconnected(): Promise<void> {
    if (this.outage.recovered()) await this.options.onReconnect?.();
  }
}
