import { shuffleSettings } from '#libs/data-order';
import { TRAINING_MODE_FIELDS, type JobSpec, type TrainingSpec } from '#libs/job-spec';
import type { Learner } from '#libs/learner';
import { RequestAbortedError, type ClaimedTask, type MasterClient } from '#libs/master-client';
import type { LineLogger } from '#libs/logging';
import type { MemberStatus, RoundNotice } from '#libs/messaging';
import { PserverError, ShardCallError, type ParamInfo, type ShardedPserverClient } from '#libs/pserver-client';
import { wireClock } from '#libs/pserver-protocol';
import { sleep } from '#libs/retry';
import { InterruptedError, afterAbort, unlessAborted } from './abort-race.js';
import { describeChunkCache } from './chunk-cache.js';
import {
  CLAIM_AHEAD_MS,
  FULL_JOB_RETRY_MS,
  HAND_BACK_BUDGET_MS,
  IDLE_TASK_WAIT_MS,
  PROGRESS_LOG_INTERVAL_MS,
  STATUS_UPDATE_INTERVAL_MS,
  THROUGHPUT_WINDOW_MS,
} from './defaults.js';
import { JobSetupError, PserverOutageError } from './errors.js';
import { MinibatchReader, type ChunkSource } from './minibatch-reader.js';
import { QuorumMembership } from './quorum-membership.js';
import { TaskAhead, TaskCountdown, type AheadPull, type HeldTask } from './task-ahead.js';
import { TaskLease } from './task-lease.js';
import { StepPhases } from './step-phases.js';
import type { TrainerMetrics } from './trainer-metrics.js';
import { ThroughputMeter } from './throughput.js';
import { TrainingLoop, type TaskOutcome, type TaskSignals } from './training-loop.js';

/** The master calls a job trainer makes (a `MasterClient`). */
export type TaskSource = Pick<MasterClient, 'pullTask' | 'renewClaim' | 'reportDone' | 'reportFailed' | 'handBack'>;

/** The parameter server calls a job trainer makes (a `ShardedPserverClient`). */
export type JobParameterClient = Pick<
  ShardedPserverClient,
  'initialize' | 'join' | 'leave' | 'pushGradients' | 'pullParams' | 'status'
>;

/** A connection to a job's parameter servers, and how to let it go. */
export interface PserverConnection {
  client: JobParameterClient;
  close(): void;
}

/** What a `JobTrainer` needs. */
export interface JobTrainerDeps {
  master: TaskSource;
  /** A fresh learner for a job (in `local` mode, one that hands back parameter deltas). */
  createLearner: (spec: JobSpec) => Learner;
  /** Connects to the job's parameter servers for a model with these parameters. */
  connectPservers: (spec: JobSpec, params: ParamInfo[]) => Promise<PserverConnection>;
  logger: LineLogger;
  /** Receives member status changes (a `MemberBeacon.update`). */
  status?: (patch: Partial<MemberStatus>) => void;
  /** Where steps, samples and step phases are counted for Prometheus. */
  metrics?: TrainerMetrics;
  /** Reads chunks (`readChunkAt` by default). */
  readChunk?: ChunkSource;
  /** Memory for a job's chunks kept between epochs (`CHUNK_CACHE_BYTES` by default; 0: none). */
  chunkCacheBytes?: number;
  idleTaskWaitMs?: number;
  progressLogIntervalMs?: number;
  statusUpdateIntervalMs?: number;
  handBackBudgetMs?: number;
  pullWaitMs?: number;
  /** How long the parameter servers may stay unreachable before a task fails. */
  pserverOutageBudgetMs?: number;
  /** How often to join the quorum again while joined (a sign of life). */
  quorumHeartbeatMs?: number;
  /** Pause before asking again for a task of a job that has `trainers.max` trainers at work. */
  fullJobRetryMs?: number;
  /** Shortest pause between renewals of a task's claim. */
  claimRenewMinMs?: number;
  /**
   * How long before the task in hand is expected to end the next one is claimed (`CLAIM_AHEAD_MS`);
   * 0 claims it during the last minibatch only.
   */
  claimAheadMs?: number;
  /**
   * Listens to the job's round notices (`SUBJECTS.rounds`, with `training.roundEnd: first`) until
   * the returned function is called.
   */
  watchRounds?: (jobId: string, onNotice: (notice: RoundNotice) => void) => () => void;
  /**
   * Asked when the job has its share of trainers at work: true returns `full` (the trainer
   * serves another job), false waits and asks the master again.
   */
  leaveWhenFull?: (jobId: string) => boolean;
}

/** Mode fields only the parameter servers read. */
const PSERVER_MODE_FIELDS = ['stalenessAware'] as const;

type ModeField = {
  [M in keyof typeof TRAINING_MODE_FIELDS]: keyof (typeof TRAINING_MODE_FIELDS)[M];
}[keyof typeof TRAINING_MODE_FIELDS];

/** The `training` fields the training loop reads: the mode and the fields of modes. */
type LoopTraining = Pick<TrainingSpec, 'mode' | Exclude<ModeField, (typeof PSERVER_MODE_FIELDS)[number]>>;

const LOOP_TRAINING_FIELDS: readonly string[] = [
  'mode',
  ...Object.values(TRAINING_MODE_FIELDS)
    .flatMap((fields) => Object.keys(fields))
    .filter((field) => !(PSERVER_MODE_FIELDS as readonly string[]).includes(field)),
];

function loopTraining(training: TrainingSpec): LoopTraining {
  return Object.fromEntries(
    LOOP_TRAINING_FIELDS.map((field) => [field, training[field as keyof TrainingSpec]]),
  ) as LoopTraining;
}

/**
 * Why `run` returned: the job stopped, the trainer was preempted, or the job has its share of
 * trainers at work (`full`), so this one may serve another job.
 */
export type JobRunEnd = 'stopped' | 'preempted' | 'full';

/**
 * Serves one job until it stops or the trainer is preempted: builds the learner, takes part in
 * the parameter servers' initialisation (or, joining a job under way, finds it done and pulls
 * the current parameters), then pulls, trains and reports tasks one at a time. It joins the
 * sync quorum while it holds a task (counted from the next version, with a heartbeat) and
 * leaves it when no task came for a while or the job has `trainers.max` trainers at work. The
 * claim of the task in hand is renewed while the trainer works on it. The next task is claimed,
 * and its first chunk read, while the task in hand trains its last minibatches, and a task's
 * `done` report goes out while the next one trains, so a trainer does not wait for the master
 * between tasks. On stop the current task is dropped; on preemption the current minibatch is
 * finished and the task handed back, and so is a task claimed ahead. Everything is released
 * before it returns.
 */
export class JobTrainer {
  private readonly idleTaskWaitMs: number;

  constructor(private readonly deps: JobTrainerDeps) {
    this.idleTaskWaitMs = deps.idleTaskWaitMs ?? IDLE_TASK_WAIT_MS;
  }

  /**
   * Runs the job. Set-up failures (learner, parameter servers unreachable) and parameter server
   * failures during a task (after the task was reported failed) are thrown once everything was
   * released, so the caller can set the job up again; other task failures are reported to the
   * master and the job goes on.
   */
  async run(spec: JobSpec, signals: TaskSignals): Promise<JobRunEnd> {
    const { logger } = this.deps;
    const jobId = spec.id;
    const either = AbortSignal.any([signals.stop, signals.preempt]);
    // Made once per run: a per-task grace signal would leave a listener on `preempt` per task.
    const settleSignal = AbortSignal.any([
      signals.stop,
      afterAbort(signals.preempt, this.deps.handBackBudgetMs ?? HAND_BACK_BUDGET_MS),
    ]);
    const learner = this.deps.createLearner(spec);
    let reader: MinibatchReader;
    try {
      reader = new MinibatchReader({
        batchSize: spec.training.batchSize,
        layout: spec.dataset.layout,
        readChunk: this.deps.readChunk,
        shuffle: shuffleSettings(jobId, spec.training),
        // A learner that converts uint8 features itself is handed them as bytes.
        featureBytes: learner.readsByteFeatures === true,
        ...(this.deps.chunkCacheBytes !== undefined ? { cacheBytes: this.deps.chunkCacheBytes } : {}),
      });
    } catch (err) {
      learner.shutdown();
      throw err;
    }
    let pservers: PserverConnection | undefined;
    let membership: QuorumMembership | undefined;
    let loop: TrainingLoop | undefined;
    let threw = false;
    /** The next task, claimed while the one in hand ends. */
    let ahead: TaskAhead | undefined;
    /** The minibatches left of the task in hand, which says when to claim ahead. */
    let countdown: TaskCountdown | undefined;
    /** The `done` report of the last task, still on its way. */
    let reporting: Promise<JobRunEnd | undefined> | undefined;
    /** Stops listening to the job's round notices (`roundEnd: first`). */
    let stopRounds: (() => void) | undefined;
    try {
      let initial: Awaited<ReturnType<Learner['getParams']>>;
      try {
        await learner.initialize({ model: spec.model, layout: spec.dataset.layout, seed: spec.training.seed });
        initial = await learner.getParams();
      } catch (cause) {
        // The spec itself cannot be built: trying again here would fail the same way.
        throw new JobSetupError(jobId, { cause });
      }
      const connecting = this.deps.connectPservers(
        spec,
        initial.map((p) => ({ name: p.name, shape: p.shape })),
      );
      // A connection that completes after an abort (and so is never used) is still released.
      connecting.then((c) => (either.aborted ? c.close() : undefined)).catch(() => undefined);
      pservers = await unlessAborted(connecting, either);
      const ps = pservers.client;
      // The election may wait long for another trainer's initialisation; a stop or SIGTERM does not.
      const { elected } = await unlessAborted(
        ps.initialize(JSON.stringify(spec), () => learner.getParams()),
        either,
      );
      logger.log(`job ${jobId}: parameters ${elected ? 'initialised by this trainer' : 'initialised'}; training`);
      this.deps.status?.({ state: 'idle', jobId, taskId: undefined, samplesPerSecond: 0 });

      const quorum = new QuorumMembership(ps, {
        heartbeatMs: this.deps.quorumHeartbeatMs,
        onHeartbeatError: (err) => logger.warn(`job ${jobId}: quorum heartbeat failed: ${err.message}`),
      });
      membership = quorum;
      const reporter = new ProgressReporter(jobId, this.deps, () => reader.assemblyMs);
      const { mode, roundEnd } = spec.training;
      loop = new TrainingLoop(learner, ps, {
        ...loopTraining(spec.training),
        maxGradientRetries: spec.training.maxGradientRetries,
        clipping: { clipNorm: spec.optimizer.clipNorm, clipValue: spec.optimizer.clipValue },
        pullWaitMs: this.deps.pullWaitMs,
        outageBudgetMs: this.deps.pserverOutageBudgetMs,
        onMinibatch: (samples, versions) => {
          reporter.minibatch(samples, versions);
          countdown?.minibatch(samples);
        },
        phases: reporter.phases,
        onWait: (message) => logger.log(`job ${jobId}: ${message}`),
        onReconnect: async () => {
          logger.log(`job ${jobId}: parameter servers answer again; rejoining the quorum`);
          await quorum.refresh().catch((err: Error) => logger.warn(`job ${jobId}: rejoining failed: ${err.message}`));
        },
      });
      if (mode === 'local' && roundEnd === 'first') {
        const rounds = loop;
        stopRounds = this.deps.watchRounds?.(jobId, (notice) => rounds.roundWaiting(notice.shard, notice.version));
      }
      let full = false;

      for (;;) {
        if (signals.stop.aborted) return 'stopped';
        if (signals.preempt.aborted) return 'preempted';
        // With no next task in hand, the trainer steps out of the quorum before it waits for one,
        // as a Horovod worker out of data joins: the others' synchronous steps would otherwise
        // wait for a push it cannot make, at the end of every epoch for as long as the last
        // tasks train elsewhere. It joins again with its next task.
        // Nor does the last task's round stay on its way (`overlapRounds`) while the trainer
        // waits: the task is reported once it landed.
        if (ahead?.holdsTask !== true && (await loop.landRounds(signals.stop)) === 'interrupted') continue;
        const steppedOut = quorum.isJoined && ahead?.holdsTask !== true;
        if (steppedOut) await quorum.leave();
        const early = await ahead?.take();
        ahead = undefined;
        const pulled: AheadPull =
          early ??
          (await this.deps.master
            .pullTask(jobId, { timeoutMs: this.idleTaskWaitMs, signal: either })
            .then((p) => (p.kind === 'claimed' ? { task: p.task, lease: this.lease(p.task) } : p)));
        if ('kind' in pulled) {
          // Stopped or preempted: the loop ends above, and leaving happens on the way out.
          if (pulled.reason === 'aborted') continue;
          if (steppedOut) {
            this.deps.status?.({ state: 'idle', taskId: undefined, samplesPerSecond: 0 });
            logger.log(`job ${jobId}: no task for now; left the quorum`);
          }
          if (pulled.reason === 'full') {
            if (this.deps.leaveWhenFull?.(jobId) === true) {
              logger.log(`job ${jobId}: the job has its share of trainers at work; looking for another job`);
              return 'full';
            }
            // Asking again at once would only bounce tasks off the master.
            if (!full) {
              full = true;
              this.deps.status?.({ state: 'waiting', taskId: undefined, samplesPerSecond: 0 });
              logger.log(
                `job ${jobId}: the job has its fair share of trainers, at most trainers.max (${spec.trainers.max}) trainers at work; waiting`,
              );
            }
            await sleep(this.deps.fullJobRetryMs ?? FULL_JOB_RETRY_MS, either, { ref: false });
          }
          continue;
        }
        const task = pulled.task;
        const lease = pulled.lease;
        if (lease.lost.aborted) {
          // Claimed ahead, and re-queued by the master before its turn came: nothing to report.
          logger.log(`job ${jobId} task ${task.taskId} (epoch ${task.epoch}): claimed ahead, then re-queued`);
          continue;
        }
        if (full) {
          full = false;
          logger.log(`job ${jobId}: admitted`);
        }
        if (!quorum.isJoined) {
          try {
            loop.joined((await quorum.join()).versions);
          } catch (err) {
            // Not the task's fault: it goes back to the master at once, uncounted.
            lease.end();
            await this.handBackUnstarted(task, signals);
            throw err;
          }
        }
        reporter.startTask(task);
        // Claimed near this task's end, so the next one is ready when this one is done.
        countdown = new TaskCountdown(task, spec.training.batchSize, this.deps.claimAheadMs ?? CLAIM_AHEAD_MS, () => {
          ahead = new TaskAhead({
            pull: (signal) =>
              this.deps.master.pullTask(jobId, {
                timeoutMs: this.idleTaskWaitMs,
                signal: AbortSignal.any([either, signal]),
              }),
            lease: (next) => this.lease(next),
            onClaimed: (next) => reader.readAhead(next),
          });
        });
        let outcome: TaskOutcome | undefined;
        try {
          outcome = await loop.runTask(task, reader, {
            stop: AbortSignal.any([signals.stop, lease.lost]),
            preempt: signals.preempt,
          });
          // The last round of the task before, if still on its way, lands before this task's
          // outcome is reported, so that task is reported first.
          if (outcome.kind !== 'done') await loop.landRounds(signals.stop);
        } finally {
          // A task whose last round is still on its way stays claimed until it landed.
          const landing = outcome?.kind === 'done' ? outcome.landing : undefined;
          if (landing === undefined) lease.end();
          else void landing.then(() => lease.end());
          countdown = undefined;
        }
        // The reports go out in order: each waits for the one before it.
        const before = reporting;
        reporting = undefined;
        if (outcome.kind === 'done') {
          const done = outcome;
          // Reported while the next task trains; a report that fails is seen at the next one.
          const report = (async () =>
            (await before) ?? this.settle(task, await afterLanding(done, signals), signals, settleSignal))();
          report.catch(() => undefined);
          reporting = report;
          continue;
        }
        const end = (await before) ?? (await this.settle(task, outcome, signals, settleSignal));
        if (end !== undefined) return end;
      }
    } catch (err) {
      if (err instanceof InterruptedError) return signals.preempt.aborted ? 'preempted' : 'stopped';
      threw = true;
      throw err;
    } finally {
      stopRounds?.();
      // A round still on its way lands (within the hand-back budget once preempted) unless the
      // job stopped or the run failed; its task is told either way.
      if (signals.stop.aborted || threw) loop?.abandonRounds();
      else await loop?.landRounds(settleSignal).catch(() => loop?.abandonRounds());
      await this.releaseAhead(ahead, signals);
      await reporting?.catch((err: Error) => logger.warn(`job ${jobId}: reporting a task failed: ${err.message}`));
      if (membership !== undefined) {
        await membership
          .leave()
          .catch((err: Error) => logger.warn(`job ${jobId}: leaving the quorum failed: ${err.message}`));
      }
      pservers?.close();
      learner.shutdown();
      logger.log(`job ${jobId}: ${describeChunkCache(reader.cacheStats())}`);
      this.deps.status?.({ state: 'idle', jobId: undefined, taskId: undefined, samplesPerSecond: 0 });
    }
  }

  /** Renews a claimed task's claim while it is this trainer's. */
  private lease(task: ClaimedTask): TaskLease {
    return new TaskLease(this.deps.master, task, {
      minRenewMs: this.deps.claimRenewMinMs,
      onLost: (reason) =>
        this.deps.logger.warn(
          `job ${task.jobId} task ${task.taskId} (epoch ${task.epoch}): no longer ours (${reason})`,
        ),
    });
  }

  /** Hands a task that did not start back to the master, uncounted, within the hand-back budget. */
  private async handBackUnstarted(task: ClaimedTask, signals: TaskSignals): Promise<void> {
    await this.deps.master
      .handBack(task, { signal: signals.stop, budgetMs: this.deps.handBackBudgetMs ?? HAND_BACK_BUDGET_MS })
      .catch(() => undefined);
  }

  /**
   * Gives up a task claim made ahead: a pull on its way stops, and a task it claimed goes back to
   * the master uncounted (unless the job stopped, when there is nothing left to hand it to).
   */
  private async releaseAhead(ahead: TaskAhead | undefined, signals: TaskSignals): Promise<void> {
    if (ahead === undefined) return;
    const release = async (held: HeldTask | undefined): Promise<void> => {
      if (held === undefined) return;
      held.lease.end();
      if (signals.stop.aborted) return;
      this.deps.logger.log(
        `job ${held.task.jobId} task ${held.task.taskId} (epoch ${held.task.epoch}): claimed ahead; handing it back`,
      );
      await this.handBackUnstarted(held.task, signals);
    };
    // A stopped job waits for nothing; the pull ends on its own within its wait.
    if (signals.stop.aborted) void ahead.cancel().then(release);
    else await release(await ahead.cancel());
  }

  /**
   * Reports a task's outcome; says whether the run ends with it. Reports are retried until the
   * master answers, the job stops, or (once preempted) the hand-back budget is spent.
   */
  private async settle(
    task: ClaimedTask,
    outcome: TaskOutcome,
    signals: TaskSignals,
    signal: AbortSignal,
  ): Promise<JobRunEnd | undefined> {
    const { master, logger } = this.deps;
    const what = `job ${task.jobId} task ${task.taskId} (epoch ${task.epoch})`;
    try {
      switch (outcome.kind) {
        case 'done':
          await master.reportDone(task, outcome.samples, { signal });
          return undefined;
        case 'failed':
          logger.warn(`${what} failed: ${outcome.error}`);
          await master.reportFailed(task, outcome.error, { signal });
          // A parameter server that failed outright may have restarted without the job's state:
          // the caller sets the job up again.
          if (
            outcome.cause instanceof ShardCallError ||
            outcome.cause instanceof PserverError ||
            outcome.cause instanceof PserverOutageError
          ) {
            throw outcome.cause;
          }
          return undefined;
        case 'returned':
          logger.log(
            `${what}: ${signals.preempt.aborted ? 'preempted' : 'interrupted'} after ${outcome.samples} samples; handing it back`,
          );
          await master.handBack(task, { signal });
          return signals.preempt.aborted ? 'preempted' : undefined;
        case 'abandoned':
          if (!signals.stop.aborted) {
            // The master took the task back (its renewal was refused): nothing to report.
            logger.log(`${what}: dropped after ${outcome.samples} samples; the master re-queued it`);
            return undefined;
          }
          logger.log(`${what}: job stopped; task dropped`);
          return 'stopped';
      }
    } catch (err) {
      if (!(err instanceof RequestAbortedError)) throw err;
      logger.warn(`${what}: report not delivered: ${err.message}`);
      return signals.preempt.aborted ? 'preempted' : 'stopped';
    }
  }
}

/**
 * A done task's outcome once its last round (`overlapRounds`) landed: still done; `failed` with
 * the landing's error; interrupted, dropped if the job stopped, else handed back (uncounted).
 */
async function afterLanding(outcome: TaskOutcome & { kind: 'done' }, signals: TaskSignals): Promise<TaskOutcome> {
  if (outcome.landing === undefined) return outcome;
  const landed = await outcome.landing;
  const { samples } = outcome;
  switch (landed.kind) {
    case 'landed':
      return { kind: 'done', samples };
    case 'interrupted':
      return signals.stop.aborted ? { kind: 'abandoned', samples } : { kind: 'returned', samples };
    case 'failed': {
      const error = landed.error instanceof Error ? landed.error.message : String(landed.error);
      return { kind: 'failed', samples, error: `its last round did not land: ${error}`, cause: landed.error };
    }
  }
}

/** Keeps the rate, the progress lines and the member status of a running job. */
class ProgressReporter {
  private readonly meter = new ThroughputMeter(THROUGHPUT_WINDOW_MS);
  /** Where the time of the steps goes, published with each status update. */
  readonly phases: StepPhases;
  private task: ClaimedTask | undefined;
  private lastLogAt = Date.now();
  private lastStatusAt = 0;

  /** `assemblyMs` reads the job's minibatch reader's assembly time (`MinibatchReader.assemblyMs`). */
  constructor(
    private readonly jobId: string,
    private readonly deps: JobTrainerDeps,
    assemblyMs: () => number,
  ) {
    const metrics = deps.metrics;
    this.phases = new StepPhases(
      undefined,
      metrics && ((phases) => metrics.stepPhases(jobId, phases)),
      () => wireClock.read(),
      assemblyMs,
    );
  }

  startTask(task: ClaimedTask): void {
    this.task = task;
    // The step phases go out at most once per status interval, so each covers many steps even
    // when tasks are short.
    const phases = this.statusDue(Date.now()) ? { stepPhases: this.phases.take() } : {};
    this.deps.status?.({
      state: 'training',
      jobId: this.jobId,
      taskId: task.taskId,
      samplesPerSecond: this.rate(),
      ...phases,
    });
  }

  minibatch(samples: number, versions: readonly number[]): void {
    this.meter.add(samples);
    this.deps.metrics?.step(this.jobId, samples);
    const now = Date.now();
    if (this.statusDue(now)) this.deps.status?.({ samplesPerSecond: this.rate(), stepPhases: this.phases.take() });
    if (now - this.lastLogAt >= (this.deps.progressLogIntervalMs ?? PROGRESS_LOG_INTERVAL_MS)) {
      this.lastLogAt = now;
      const version =
        versions.length > 0 && versions.every((v) => v === versions[0])
          ? String(versions[0])
          : `[${versions.join(', ')}]`;
      this.deps.logger.log(
        `job ${this.jobId} epoch ${this.task?.epoch} task ${this.task?.taskId}: ${this.rate()} samples/s, version ${version}`,
      );
    }
  }

  /** True (and the interval restarts) when a status update with the step phases is due. */
  private statusDue(now: number): boolean {
    if (now - this.lastStatusAt < (this.deps.statusUpdateIntervalMs ?? STATUS_UPDATE_INTERVAL_MS)) return false;
    this.lastStatusAt = now;
    return true;
  }

  private rate(): number {
    return Math.round(this.meter.rate() * 10) / 10;
  }
}
