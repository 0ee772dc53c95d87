import type { Batch, Learner, PlainTensor } from '#libs/learner';
import type { ClaimedTask } from '#libs/master-client';
import {
  PserverTimeoutError,
  ShardCallError,
  type PulledParams,
  type PushOutcome,
  type ShardedPserverClient,
} from '#libs/pserver-client';
import type { TrainingSpec } from '#libs/job-spec';
import { sleep } from '#libs/retry';
import { PULL_WAIT_MS } from './defaults.js';
import { InterruptedError, unlessAborted } from './abort-race.js';
import { elasticExchange } from './elastic-averaging.js';
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

/**
 * What became of the last round of a task that ended with it still on its way (`overlapRounds`):
 * `landed` (taken, or dropped as a stale round is: the task is done), `interrupted` while waiting
 * out an outage (the job stopped or the trainer is going), or `failed` with the error the landing
 * threw.
 */
export type RoundLanding = { kind: 'landed' } | { kind: 'interrupted' } | { kind: 'failed'; error: unknown };

/** How a task ended. */
export type TaskOutcome =
  | {
      kind: 'done';
      samples: number;
      /**
       * `overlapRounds`: the task's last round is still on its way (the next task trains
       * meanwhile); the task is done once this says it landed. Absent: it is done now.
       */
      landing?: Promise<RoundLanding>;
    }
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

/** The job's training mode and the fields of that mode the loop reads (see `TrainingSpec`). */
export type LoopMode = Pick<
  TrainingSpec,
  'mode' | 'backupTrainers' | 'maxStaleness' | 'localSteps' | 'localSync' | 'elasticAlpha' | 'roundEnd'
>;

/** Settings of a `TrainingLoop`. */
export interface TrainingLoopOptions extends LoopMode {
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
  /**
   * `async` only: keep one push on its way while the next minibatch trains (each update is then
   * computed on parameters that lack this trainer's own last one, a staleness of at most one
   * more). Ignored in the other modes, whose steps wait for the step they pushed to.
   */
  overlapPushes?: boolean;
  /**
   * `local` only (plain, not elastic): train the next round while the last round's delta is on
   * its way. The round's average lands as soon as it is back (between two steps; at the next
   * round's end at the latest), and the steps taken meanwhile are carried onto it. Ignored in the
   * other modes.
   */
  overlapRounds?: boolean;
}

/** What one minibatch came to: done with (pushed, dropped, or trained locally), or interrupted. */
type StepResult = 'pushed' | 'interrupted';

/**
 * What became of one push: `taken` by every shard; `dropped` (refused as stale where the mode
 * drops late updates); `retry` without counting a refusal (a shard away, or one that went back
 * to an older version: the parameters to use next are set); `refused` as stale (recompute);
 * `taken` says whether the parameters that came back with the push were loaded;
 * `interrupted` while waiting out an outage.
 */
type PushResult =
  | { kind: 'taken'; loaded: boolean }
  | { kind: 'dropped' | 'retry' | 'interrupted' }
  | { kind: 'refused'; error: Error };

/** What came of a push call: its reply, or the error it failed with (kept to be looked at later). */
type Sent = { outcome: PushOutcome & { params?: PulledParams } } | { error: unknown };

/** A push still on its way while the next minibatch trains (`overlapPushes`). */
interface InFlightPush {
  batch: Batch;
  /** Shard versions of the parameters its update was computed on (and pushed for). */
  computedOn: number[];
  sent: Promise<Sent>;
}

/** A round's delta still on its way while the next round trains (`local` with `overlapRounds`). */
interface RoundInFlight {
  /** Shard versions of the parameters the delta was computed from (and pushed for). */
  pushed: number[];
  sent: Promise<Sent>;
  /** Set once `sent` settled: the round can land without waiting. */
  answered: boolean;
  /** Set when the task whose last round this is ended: told what became of the round. */
  settled?: (landing: RoundLanding) => void;
}

/** The local steps taken since the last push of a parameter delta (`local` mode). */
interface LocalRound {
  steps: number;
  samples: number;
}

/** Runs `fn` after the I/O callbacks already due (`setImmediate`), so its work fills a wait. */
function whenIdle<T>(fn: () => Promise<T>): Promise<T> {
  return new Promise<void>((resolve) => setImmediate(resolve)).then(fn);
}

function sameVersions(a: readonly number[] | undefined, b: readonly number[]): boolean {
  return a !== undefined && a.length === b.length && a.every((v, i) => v === b[i]);
}

/** `params` with `progress` (the same tensors, by name) added to them, in new arrays. */
function carriedOnto(params: readonly PlainTensor[], progress: readonly PlainTensor[]): PlainTensor[] {
  const byName = new Map(progress.map((t) => [t.name, t]));
  return params.map((p) => {
    const step = byName.get(p.name);
    if (step === undefined || step.data.length !== p.data.length) {
      throw new Error(`the local progress has no tensor '${p.name}' of ${p.data.length} values to carry`);
    }
    const sum = new Float32Array(p.data.length);
    const a = p.data;
    const b = step.data;
    for (let i = 0; i < sum.length; i++) sum[i] = a[i]! + b[i]!;
    return { ...p, data: sum };
  });
}

/** One version for every shard: the shards step together, so a pull should not mix steps. */
function uniform(versions: number | readonly number[]): boolean {
  return typeof versions === 'number' || versions.every((v) => v === versions[0]);
}

/**
 * The training modes on one trainer. For each minibatch, make sure the learner holds parameters
 * at least as new as needed, train, push the update; a push refused as stale refreshes the
 * parameters and recomputes the same minibatch, up to `maxGradientRetries` times. Except:
 *
 * - `sync` with `backupTrainers`: the step went on without this trainer (it was one of the
 *   slowest), so its gradient is dropped, as the backup-worker scheme does: the minibatch counts
 *   as done, and the next one is computed on the fresh parameters.
 * - `ssp`: the trainer counts its own clock: each push is for the version after its last one
 *   (never one older than its parameters), and it computes on parameters at most `maxStaleness`
 *   versions older than the version it pushes for, waiting in the pull otherwise.
 * - `local`: the learner (in delta mode) trains `localSteps` minibatches on its copy, then the
 *   parameter delta is pushed, and the next round starts from the parameters the servers hold
 *   (with `elasticAlpha`, elastic averaging: the trainer keeps its own copy, pulls the center,
 *   moves toward it by `elasticAlpha * (x - center)` and pushes that difference). A round ends
 *   early with its task (done or handed back), so a task's minibatches are pushed with it. A
 *   delta refused as stale, or whose push a shard may or may not have taken, is dropped: its
 *   minibatches still count as done. With `overlapRounds` the next round trains while a round's
 *   delta is on its way; once it is answered (between two steps, or at that round's end when the
 *   answer is not in by then) the average it brought back is loaded with the steps taken since
 *   carried onto it, and the round's steps are pushed as the next delta. This goes
 *   on across tasks: a task's last round lands during the next task's first round (or in
 *   `landRounds` when no task follows), and the task is done only once it landed.
 *
 * Parameters are pulled again only when the versions the learner holds are not enough: after a
 * push by rounds (`sync`, `local` with `localSync`) the next minibatch needs the step that push
 * was part of (version + 1), in `ssp` the version `maxStaleness` before its next clock, after
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
  /** `ssp`: the version each shard's next push is for at least. */
  private clock: number[] | undefined;
  /** `local`: the round in progress. */
  private readonly round: LocalRound = { steps: 0, samples: 0 };
  /** `roundEnd: first`: the latest round a shard said has its first delta (`roundWaiting`). */
  private waitingRound: { shard: number; version: number } | undefined;
  /** `overlapPushes`: the push of the previous minibatch, not yet answered. */
  private inFlight: InFlightPush | undefined;
  /** `overlapRounds`: the delta of the previous round, not yet landed. */
  private roundInFlight: RoundInFlight | undefined;
  /**
   * `overlapRounds`: the steps of the round in progress taken before the previous round landed
   * in the middle of it (carried onto its average then, and pushed with the rest of the round).
   */
  private carriedInRound: PlainTensor[] | undefined;
  /** The reader of the task in hand, which assembles minibatches while the loop waits. */
  private reader: Pick<MinibatchReader, 'prepareWhile'> | undefined;
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

  /**
   * The trainer joined the quorum (again) when the shards were at `versions`: rounds went on
   * without it meanwhile, so the parameters it still holds from before are not enough any more.
   * The next minibatch trains on each shard's version at least; pushed from older ones it would
   * be computed only to be refused as stale. Each shard is asked for its own version, which it
   * already has: the shards step apart (one may be a version ahead), and the open round of the
   * one behind may wait for this trainer's push (a quorum with `minContributors`), so wanting
   * the newest version on every shard could wait for a step that waits for this trainer.
   */
  joined(versions: readonly number[]): void {
    const needed = this.needed;
    this.needed = versions.map((v, k) => Math.max(v, typeof needed === 'number' ? needed : (needed[k] ?? 0)));
  }

  /**
   * `roundEnd: first`: shard `shard`'s round on `version` has its first delta and waits for the
   * others. When that is the round in progress here, it ends after the step on hand (or the
   * first, when none was taken yet); a notice of another round is of no consequence.
   */
  roundWaiting(shard: number, version: number): void {
    if (this.options.roundEnd === 'first') this.waitingRound = { shard, version };
  }

  /** Shard versions of the parameters the learner holds (empty before the first pull). */
  get versions(): readonly number[] {
    return this.held ?? [];
  }

  /**
   * Trains on every minibatch of a task and says how it ended; never throws. The next minibatch
   * is assembled while the current one is pushed, and reading waits on the disk at most
   * once per chunk. In `local` mode the round in progress is pushed when the task is done or
   * handed back (not when the job stops); with `overlapRounds` a task that is done may leave its
   * last round on its way, which its outcome's `landing` settles.
   */
  async runTask(task: ClaimedTask, reader: MinibatchReader, signals: TaskSignals): Promise<TaskOutcome> {
    const either = AbortSignal.any([signals.stop, signals.preempt]);
    const batches = reader.batches(task);
    this.reader = reader;
    let samples = 0;
    let outcome: TaskOutcome | undefined;
    /** Set when the task ends done with its last round still on its way. */
    let handedOn = false;
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
        if (signals.preempt.aborted) {
          outcome = { kind: 'returned', samples };
          break;
        }
        // The next minibatch is assembled once the loop is idle, which is while this one's push
        // is on the wire, rather than before this one trains. A read that fails is reported when
        // its minibatch is reached, not while this one trains.
        next = whenIdle(() => batches.next());
        next.catch(() => undefined);
        if ((await this.trainMinibatch(batch, either)) === 'interrupted') {
          if (signals.stop.aborted) return { kind: 'abandoned', samples };
          // The minibatch before this one may still be on its way: it is seen through first.
          if ((await this.drain(signals.stop)) === 'interrupted') return { kind: 'abandoned', samples };
          return { kind: 'returned', samples };
        }
        samples += batch.size;
      }
      if (signals.stop.aborted) return { kind: 'abandoned', samples };
      // Preempted, the trainer still pushes what it trained: the stop signal alone cuts that short.
      // A task ends only once the parameter servers took (or refused) each of its minibatches.
      if ((await this.endRound(signals.stop)) === 'interrupted') return { kind: 'abandoned', samples };
      const last = this.roundInFlight;
      if (outcome === undefined && last !== undefined && !signals.stop.aborted) {
        // Overlapped rounds go on across tasks: the next task trains while this one's last round
        // is on its way, and this task is done once that round landed (at the end of the next
        // task's first round, or in `landRounds`).
        // A task that took no step since the last one's round was sent waits for that round too.
        const earlier = last.settled;
        const landing = new Promise<RoundLanding>((resolve) => {
          last.settled =
            earlier === undefined
              ? resolve
              : (landed) => {
                  earlier(landed);
                  resolve(landed);
                };
        });
        handedOn = true;
        return { kind: 'done', samples, landing };
      }
      if ((await this.drain(signals.stop)) === 'interrupted') return { kind: 'abandoned', samples };
    } catch (err) {
      if (signals.stop.aborted) return { kind: 'abandoned', samples };
      return { kind: 'failed', samples, error: (err as Error).message ?? String(err), cause: err };
    } finally {
      this.reader = undefined;
      // A push still on its way when the task was abandoned or failed is left to land or not.
      this.inFlight = undefined;
      // Likewise this task's round on its way: the next round starts from the servers'
      // parameters. The last round of the task before (done, and waiting for it) stays, for
      // `landRounds`; the steps taken on it since are dropped with this task.
      const round = this.roundInFlight;
      if (round !== undefined && !handedOn) {
        if (round.settled === undefined) {
          this.roundInFlight = undefined;
          this.held = undefined;
        }
        this.round.steps = 0;
        this.round.samples = 0;
      } else if (round === undefined && this.overlapsRounds() && this.round.steps > 0) {
        // The round before landed during this task, which ended without pushing its steps: they
        // are dropped with it, and the next round starts from the servers' parameters.
        this.held = undefined;
        this.round.steps = 0;
        this.round.samples = 0;
        this.carriedInRound = undefined;
      }
      await batches.return(undefined).catch(() => undefined);
    }
    if (signals.stop.aborted) return { kind: 'abandoned', samples };
    return outcome ?? { kind: 'done', samples };
  }

  /**
   * Trains on one minibatch until the parameter servers take its update (or, in `local` mode,
   * trains on it locally, pushing the round's delta when it is the round's last). Returns
   * `interrupted` when the signal fired while waiting for parameters or for the parameter
   * servers (nothing was pushed).
   * @throws GradientRetriesExhaustedError after too many refusals; PserverOutageError when the
   * parameter servers stayed away too long; other pserver errors as they come.
   */
  async trainMinibatch(batch: Batch, signal: AbortSignal): Promise<StepResult> {
    if (this.options.mode === 'local') return this.trainLocally(batch, signal);
    if (this.options.mode === 'async' && this.options.overlapPushes) return this.trainOverlapped(batch, signal);
    return this.trainInTurn(batch, signal);
  }

  /**
   * Trains on one minibatch and waits for the parameter servers to take its update, computing it
   * again after a refusal or a push that may not have arrived.
   */
  private async trainInTurn(batch: Batch, signal: AbortSignal): Promise<StepResult> {
    const { maxGradientRetries } = this.options;
    let refusals = 0;
    for (;;) {
      if (!(await this.refreshUnlessInterrupted(signal))) return 'interrupted';
      const update = clipGradients(await this.trainForUpdate(batch), this.options.clipping);
      const held = this.held!;
      const result = await this.pushUpdate(this.pushVersions(held), batch.size, update, signal);
      if (result.kind === 'interrupted') return 'interrupted';
      if (result.kind === 'retry') continue;
      if (result.kind === 'refused') {
        refusals += 1;
        if (refusals > maxGradientRetries) {
          throw new GradientRetriesExhaustedError(refusals, maxGradientRetries, { cause: result.error });
        }
        continue;
      }
      this.phases.endStep();
      this.options.onMinibatch?.(batch.size, held);
      return 'pushed';
    }
  }

  /** Trains on one minibatch and takes its update, in one call where the learner has one. */
  private async trainForUpdate(batch: Batch): Promise<PlainTensor[]> {
    const { learner } = this;
    if (learner.trainForUpdate !== undefined) {
      return (await this.phases.time('train', () => learner.trainForUpdate!(batch))).update;
    }
    await this.phases.time('train', () => learner.train(batch));
    return this.phases.time('getUpdate', () => learner.getUpdate());
  }

  /**
   * `async` with `overlapPushes`: trains on one minibatch while the previous one's push is on its
   * way, then waits for that push (loading the parameters it brought back) and sends this one's,
   * which the next minibatch or the task's end (`drain`) waits for. When the previous push was not
   * taken (a shard away, or a refusal), both minibatches are computed again in turn.
   */
  private async trainOverlapped(batch: Batch, signal: AbortSignal): Promise<StepResult> {
    // With a push on its way, the parameters are those it was computed on, until it lands.
    if (this.inFlight === undefined && !(await this.refreshUnlessInterrupted(signal))) return 'interrupted';
    const computedOn = [...this.held!];
    const update = clipGradients(await this.trainForUpdate(batch), this.options.clipping);
    const prior = this.inFlight;
    this.inFlight = undefined;
    if (prior !== undefined) {
      const landed = await this.land(prior, signal);
      if (landed === 'interrupted') return 'interrupted';
      if (landed === 'again') {
        if ((await this.trainInTurn(prior.batch, signal)) === 'interrupted') return 'interrupted';
        return this.trainInTurn(batch, signal);
      }
    }
    let written!: () => void;
    const handedOver = new Promise<void>((resolve) => (written = resolve));
    const sent = this.send(computedOn, batch.size, update, signal, written);
    this.inFlight = { batch, computedOn, sent };
    // Training blocks the event loop, which writes the push out: the next minibatch trains only
    // once all of it was handed to the connection, or the push would wait for that training
    // instead of overlapping it.
    await Promise.race([handedOver, sent]);
    return 'pushed';
  }

  /**
   * Waits for a push sent ahead and settles it: `taken` (the minibatch is done), `again` (it must
   * be computed again), or `interrupted` while waiting out an outage.
   */
  private async land(push: InFlightPush, signal: AbortSignal): Promise<'taken' | 'again' | 'interrupted'> {
    const sent = await this.phases.time('push', () => push.sent);
    const result = await this.settle(push.computedOn, push.computedOn, sent, signal);
    if (result.kind === 'interrupted') return 'interrupted';
    if (result.kind !== 'taken' && result.kind !== 'dropped') return 'again';
    this.phases.endStep();
    this.options.onMinibatch?.(push.batch.size, push.computedOn);
    return 'taken';
  }

  /**
   * Sees the push still on its way through, computing its minibatch again if it was not taken;
   * a round's delta on its way is landed.
   */
  private async drain(signal: AbortSignal): Promise<StepResult> {
    if (this.roundInFlight !== undefined) return this.landRound(signal, undefined);
    const push = this.inFlight;
    this.inFlight = undefined;
    if (push === undefined) return 'pushed';
    const landed = await this.land(push, signal);
    if (landed === 'again') return this.trainInTurn(push.batch, signal);
    return landed === 'interrupted' ? 'interrupted' : 'pushed';
  }

  /**
   * Lands the last round of a task that ended with it on its way (`overlapRounds`), so that
   * the task can be reported: called when no next task trains to land it, or after one that
   * ended otherwise than done (the steps it took since are dropped with it). Returns
   * `interrupted` when the signal fired while waiting out an outage (the task is then told so).
   * @throws what the landing threw (the task is told so too).
   */
  async landRounds(signal: AbortSignal): Promise<StepResult> {
    if (this.roundInFlight === undefined) return 'pushed';
    return this.landRound(signal, undefined);
  }

  /**
   * Gives up a round still on its way without waiting for it (the job stopped): its task is
   * told `interrupted`, and the next round starts from the servers' parameters.
   */
  abandonRounds(): void {
    const round = this.roundInFlight;
    if (round === undefined) return;
    this.roundInFlight = undefined;
    this.held = undefined;
    this.round.steps = 0;
    this.round.samples = 0;
    round.settled?.({ kind: 'interrupted' });
  }

  /** `local` mode: one local step; the round's delta is pushed after its last one. */
  private async trainLocally(batch: Batch, signal: AbortSignal): Promise<StepResult> {
    // A round starts from the servers' parameters; an elastic trainer keeps its own copy after
    // the first (or after an outage made it pull again).
    // With a round on its way, the next one goes on from the learner's own parameters.
    if (
      this.round.steps === 0 &&
      this.roundInFlight === undefined &&
      (this.options.elasticAlpha === undefined || this.held === undefined)
    ) {
      if (!(await this.refreshUnlessInterrupted(signal))) return 'interrupted';
    }
    if (this.roundInFlight?.answered && (await this.landEarly(signal)) === 'interrupted') return 'interrupted';
    await this.phases.time('train', () => this.learner.train(batch));
    this.round.steps += 1;
    this.round.samples += batch.size;
    this.phases.endStep();
    this.options.onMinibatch?.(batch.size, this.held ?? []);
    if (this.round.steps < (this.options.localSteps ?? 1) && !this.othersWait()) return 'pushed';
    return this.endRound(signal);
  }

  /** True when the round in progress here has another trainer's delta waiting (`roundWaiting`). */
  private othersWait(): boolean {
    const waiting = this.waitingRound;
    return waiting !== undefined && this.held !== undefined && this.held[waiting.shard] === waiting.version;
  }

  /**
   * `local` mode: pushes the delta of the round in progress (with `elasticAlpha`, the elastic
   * difference to the center, pulled first), whatever becomes of it, and starts a new round.
   * Nothing to do in other modes or when no step was taken since the last push.
   */
  private async endRound(signal: AbortSignal): Promise<StepResult> {
    if (this.options.mode !== 'local' || this.round.steps === 0) return 'pushed';
    if (this.overlapsRounds()) return this.endRoundOverlapped(signal);
    const samples = this.round.samples;
    let update: PlainTensor[];
    let versions: number[];
    try {
      if (this.options.elasticAlpha === undefined) {
        update = await this.phases.time('getUpdate', () => this.learner.getUpdate());
        versions = this.held!;
      } else {
        const worker = await this.phases.time('getUpdate', () => this.learner.getParams());
        // The elastic step needs the center as it is now.
        this.held = undefined;
        const center = (await this.refresh(signal, { load: false }))!;
        const { difference, moved } = elasticExchange(worker, center.tensors, this.options.elasticAlpha);
        this.phases.timeSync('load', () => this.learner.setParams(moved));
        update = difference;
        versions = this.held!;
      }
    } catch (err) {
      if (err instanceof InterruptedError) return 'interrupted';
      throw err;
    }
    this.round.steps = 0;
    this.round.samples = 0;
    const result = await this.pushUpdate(versions, samples, update, signal);
    // A plain local round starts from the servers' parameters, which the push may not have brought.
    if (this.options.elasticAlpha === undefined && !(result.kind === 'taken' && result.loaded)) this.held = undefined;
    return result.kind === 'interrupted' ? 'interrupted' : 'pushed';
  }

  /** True for plain `local` rounds that overlap the next one (`overlapRounds`). */
  private overlapsRounds(): boolean {
    return (
      this.options.mode === 'local' && this.options.overlapRounds === true && this.options.elasticAlpha === undefined
    );
  }

  /**
   * `local` with `overlapRounds`: takes the round's progress, lands the previous round (the
   * progress is carried onto the parameters it brings back), and sends the progress as this
   * round's delta, for the versions it now sits on, without waiting for the answer.
   */
  private async endRoundOverlapped(signal: AbortSignal): Promise<StepResult> {
    const samples = this.round.samples;
    const sinceLanding = await this.phases.time('getUpdate', () => this.learner.getUpdate());
    const carried = this.carriedInRound;
    const progress = carried === undefined ? sinceLanding : carriedOnto(sinceLanding, carried);
    this.carriedInRound = undefined;
    this.round.steps = 0;
    this.round.samples = 0;
    if (this.roundInFlight !== undefined && (await this.landRound(signal, progress)) === 'interrupted') {
      return 'interrupted';
    }
    const pushed = [...this.held!];
    let written!: () => void;
    const handedOver = new Promise<void>((resolve) => (written = resolve));
    const sent = this.send(pushed, samples, progress, signal, written);
    const round: RoundInFlight = { pushed, sent, answered: false };
    void sent.then(() => (round.answered = true));
    this.roundInFlight = round;
    // Training blocks the event loop, which writes the delta out: the next round starts once all
    // of it was handed to the connection.
    await Promise.race([handedOver, sent]);
    return 'pushed';
  }

  /**
   * `overlapRounds`: lands the previous round as soon as its answer is in, between two steps of
   * the round in progress, rather than at that round's end: the steps taken since it was sent are
   * carried onto its average now (and pushed with the rest of the round), so the round trains on
   * the average for its remaining steps instead of one round behind it.
   */
  private async landEarly(signal: AbortSignal): Promise<StepResult> {
    if (this.round.steps === 0) return this.landRound(signal, undefined);
    const soFar = await this.phases.time('getUpdate', () => this.learner.getUpdate());
    const landed = await this.landRound(signal, soFar);
    if (landed !== 'interrupted') this.carriedInRound = soFar;
    return landed;
  }

  /**
   * Waits for the round on its way and loads the parameters it brought back, with `progress`
   * (the steps taken since it was sent) carried onto them. When it brought none (refused as
   * stale, a shard away), the servers' current parameters are pulled instead: the round's
   * delta is dropped, as a plain local round's would be.
   */
  private async landRound(signal: AbortSignal, progress: PlainTensor[] | undefined): Promise<StepResult> {
    const round = this.roundInFlight!;
    this.roundInFlight = undefined;
    let landed: StepResult;
    try {
      landed = await this.landRoundOf(round, signal, progress);
    } catch (error) {
      round.settled?.({ kind: 'failed', error });
      throw error;
    }
    round.settled?.({ kind: landed === 'interrupted' ? 'interrupted' : 'landed' });
    return landed;
  }

  /** `landRound` for `round`, taken off the loop. */
  private async landRoundOf(
    { pushed, sent }: RoundInFlight,
    signal: AbortSignal,
    progress: PlainTensor[] | undefined,
  ): Promise<StepResult> {
    const result = await this.settle(pushed, pushed, await this.phases.time('push', () => sent), signal, progress);
    if (result.kind === 'interrupted') return 'interrupted';
    if (result.kind === 'taken' && result.loaded) return 'pushed';
    this.held = undefined;
    let pulled: PulledParams | undefined;
    try {
      pulled = await this.refresh(signal, { load: false });
    } catch (err) {
      if (err instanceof InterruptedError) return 'interrupted';
      throw err;
    }
    const tensors = pulled!.tensors;
    this.phases.timeSync('load', () => this.learner.setParams(progress ? carriedOnto(tensors, progress) : tensors));
    return 'pushed';
  }

  /** The versions a push computed on `held` is for: its own clock in `ssp`, else `held`. */
  private pushVersions(held: readonly number[]): number[] {
    if (this.options.mode !== 'ssp') return [...held];
    return held.map((v, k) => Math.max(v, this.clock?.[k] ?? 0));
  }

  /**
   * Pushes an update for `pushed` and sets what the next minibatch needs from the outcome;
   * loads the parameters that came back with it when they are enough.
   */
  private async pushUpdate(
    pushed: readonly number[],
    samples: number,
    update: PlainTensor[],
    signal: AbortSignal,
  ): Promise<PushResult> {
    const held = this.held!;
    const sent = await this.phases.time('push', () => this.waiting(this.send(pushed, samples, update, signal)));
    return this.settle(pushed, held, sent, signal);
  }

  /**
   * `work` on the network, while which the task's reader assembles the minibatches that come
   * next (`MinibatchReader.prepareWhile`): the reading and decoding they take then fill the wait
   * rather than come before the steps that use them.
   */
  private waiting<T>(work: Promise<T>): Promise<T> {
    this.reader?.prepareWhile(work);
    return work;
  }

  /** `push`, its failure kept in the result rather than thrown. */
  private send(
    pushed: readonly number[],
    samples: number,
    update: PlainTensor[],
    signal: AbortSignal,
    onSent?: () => void,
  ): Promise<Sent> {
    return this.push(pushed, samples, update, signal, onSent).then(
      (outcome) => ({ outcome }),
      (error: unknown) => ({ error }),
    );
  }

  /**
   * Sets what the next minibatch needs from what came of a push for `pushed` computed on `held`,
   * and loads the parameters that came back with it when they are enough (with `carried`, the
   * local steps taken since the push, added to them).
   * @throws the push's error when it is not one of the parameter servers being briefly away.
   */
  private async settle(
    pushed: readonly number[],
    held: readonly number[],
    sent: Sent,
    signal: AbortSignal,
    carried?: PlainTensor[],
  ): Promise<PushResult> {
    if ('error' in sent) {
      const err = sent.error as Error;
      if (!isTransientPserverFailure(err)) throw err;
      await this.pause(err, signal);
      if (signal.aborted) return { kind: 'interrupted' };
      // Whether the shards that were away took the push is unknown: their parameters are
      // taken as they are once they answer, and the minibatch is recomputed.
      const failed = failedShards(err);
      this.needed = held.map((v, k) => (failed.has(k) ? 0 : v));
      this.held = undefined;
      return { kind: 'retry' };
    }
    const { outcome } = sent;
    await this.reconnected();
    if (outcome.stale.length === 0) {
      this.needed = this.neededAfter(pushed, held, outcome.versions);
      if (this.options.mode === 'ssp') this.clock = pushed.map((v) => v + 1);
      const next = outcome.params;
      if (!next || !this.needed.every((v, k) => v <= (next.versions[k] ?? -1))) return { kind: 'taken', loaded: false };
      this.phases.timeSync('load', () =>
        this.learner.setParams(carried ? carriedOnto(next.tensors, carried) : next.tensors),
      );
      this.held = [...next.versions];
      return { kind: 'taken', loaded: true };
    }
    const staleShards = new Set(outcome.stale.map((e) => e.shard));
    if (this.options.mode === 'ssp') this.clock = pushed.map((v, k) => (staleShards.has(k) ? 0 : v));
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
      return { kind: 'retry' };
    }
    this.needed = held.map((v, k) => Math.max(v, outcome.versions[k] ?? 0));
    return this.dropsLateUpdates() ? { kind: 'dropped' } : { kind: 'refused', error: outcome.stale[0]! };
  }

  /** What the next minibatch needs after a push for `pushed`, computed on `held`, was taken. */
  private neededAfter(pushed: readonly number[], held: readonly number[], after: readonly number[]): number[] {
    if (this.options.mode === 'ssp') {
      const staleness = this.options.maxStaleness ?? 0;
      return pushed.map((v, k) => Math.max(held[k]!, v + 1 - staleness));
    }
    if (this.stepsByRound()) return held.map((v, k) => Math.max(v + 1, after[k] ?? 0));
    return held.map((v, k) => Math.max(v, after[k] ?? 0));
  }

  /** True when pushes join rounds that step once (`sync`, `ssp`, `local` with `localSync`). */
  private stepsByRound(): boolean {
    const { mode } = this.options;
    return mode === 'sync' || mode === 'ssp' || (mode === 'local' && (this.options.localSync ?? true));
  }

  /** True when an update refused as stale is dropped rather than recomputed. */
  private dropsLateUpdates(): boolean {
    return this.options.mode === 'local' || (this.options.mode === 'sync' && (this.options.backupTrainers ?? 0) > 0);
  }

  /**
   * Pushes an update, bringing back the next parameters in the same call where the service can
   * (then `onSent` is called once the push was handed to the connection).
   */
  private push(
    versions: readonly number[],
    samples: number,
    update: PlainTensor[],
    signal: AbortSignal,
    onSent?: () => void,
  ): Promise<PushOutcome & { params?: PulledParams }> {
    // An elastic trainer keeps its own parameters: the center is pulled when it is needed.
    if (this.params.pushPull === undefined || this.options.elasticAlpha !== undefined) {
      return this.params.pushGradients(versions, samples, update, { signal });
    }
    return this.params.pushPull(versions, samples, update, {
      signal,
      waitMs: this.options.pullWaitMs ?? PULL_WAIT_MS,
      sameVersion: this.stepsByRound() && this.options.mode !== 'ssp',
      onSent,
    });
  }

  /** `refresh`, false when the signal fired while waiting. */
  private async refreshUnlessInterrupted(signal: AbortSignal): Promise<boolean> {
    try {
      await this.refresh(signal);
      return true;
    } catch (err) {
      if (err instanceof InterruptedError) return false;
      throw err;
    }
  }

  /**
   * Pulls parameters when the held ones are older than needed, and returns them (undefined
   * when no pull was needed); loads them into the learner if they moved, unless `load` is false
   * (the elastic center).
   */
  private async refresh(signal: AbortSignal, { load = true } = {}): Promise<PulledParams | undefined> {
    const needed = this.needed;
    if (this.held !== undefined && typeof needed !== 'number' && needed.every((v, k) => v <= (this.held![k] ?? -1)))
      return undefined;
    const waitMs = this.options.pullWaitMs ?? PULL_WAIT_MS;
    for (;;) {
      if (signal.aborted) throw new InterruptedError();
      let pulled;
      try {
        pulled = await this.phases.time('wait', () =>
          this.waiting(
            unlessAborted(
              this.params.pullParams(this.needed, { waitMs, sameVersion: uniform(this.needed), signal }),
              signal,
            ),
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
      if (!load) {
        this.held = [...pulled.versions];
      } else if (!sameVersions(this.held, pulled.versions)) {
        this.phases.timeSync('load', () => this.learner.setParams(pulled.tensors));
        this.held = [...pulled.versions];
      }
      return pulled;
    }
  }

  /**
   * After a pull ran out of time: a shard whose version is below what this trainer waits for
   * (below the step in progress, when pushes join rounds) came back from a restart at an older
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
    const slack = this.stepsByRound() ? 1 : 0;
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
