import type { DataType, TensorInfo } from '#libs/pserver-protocol';
import { createOptimizerState, defaultKernelBackend, type KernelBackend } from '#libs/optimizer';
import type { CheckpointData } from './checkpoint.js';
import {
  AlreadyInitializedError,
  InvalidRequestError,
  NotInitializedError,
  ShardClosingError,
  SnapshotNotRetainedError,
} from './errors.js';
import { addDeltas, takeStep } from './gradient-step.js';
import { INIT_LEASE_MS, InitElection, type InitElectionResult } from './init-election.js';
import { stepsByRound, type ShardJobSettings } from './job-settings.js';
import { ParameterOwnership } from './parameter-ownership.js';
import type { ProgressRecord, RecordedMember } from './progress-record.js';
import { PushValidation, requireTrainer } from './push-validation.js';
import { ShardMembership } from './shard-membership.js';
import { ShardParameters, type ParameterLease } from './shard-parameters.js';
import { RecoveryStep, resumedShard, type ResumedShard } from './shard-recovery.js';
import { SnapshotStore, type Snapshot } from './snapshot-store.js';
import { StepTiming } from './step-timing.js';
import { SyncBarrier } from './sync-barrier.js';
import { VersionWaiters } from './version-waiters.js';

/** Things a job shard tells its owner about. */
export interface JobShardHooks {
  /** The shard's version advanced (a step), or the parameters were initialised (version 0). */
  onVersion?(job: JobShard, version: number): void;
  /** A snapshot for the evaluator was retained at `version`. */
  onSnapshot?(job: JobShard, version: number): void;
  /** A member was dropped for silence (`cut`: silence since its step stream was cut). */
  onLapse?(job: JobShard, trainerId: string, cut: boolean): void;
  /** The quorum's members changed (join, leave, lapse, readmission). */
  onMembership?(job: JobShard): void;
  /** A step was taken: how long its barrier stood open and its update took, in milliseconds. */
  onStepTimed?(job: JobShard, barrierMs: number, updateMs: number): void;
  /** A push was taken (not refused, not a duplicate). */
  onPush?(job: JobShard): void;
  /**
   * With `roundEnd: first`: the first delta of the round on `version` came and the round waits
   * for the others; told once per round.
   */
  onRoundWaiting?(job: JobShard, version: number): void;
}

/** Settings of a `JobShard`. */
export interface JobShardOptions {
  jobId: string;
  /** This process's shard index. */
  shard: number;
  specJson: string;
  settings: ShardJobSettings;
  initLeaseMs?: number;
  /**
   * The version `finishInit` starts at: 0 for a new job; the recorded version for a job
   * initialised again after its checkpoints were lost.
   */
  firstVersion?: number;
  /** Clock, in milliseconds. */
  now?: () => number;
  hooks?: JobShardHooks;
  /** Where the optimizer steps and gradient sums run. Default: what `TRIBUTARY_KERNELS` picks. */
  kernels?: KernelBackend;
}

/** A job's state as `Status` reports it. */
export interface JobShardStatus {
  jobId: string;
  version: number;
  members: string[];
  initialized: boolean;
  pendingPushes: number;
  mode: string;
  tensors: number;
}

/**
 * One job's slice of the parameters on one shard. It coordinates the init election
 * (`init-election.ts`), the quorum and its liveness (`shard-membership.ts`, `sync-barrier.ts`),
 * the checks on what trainers send (`push-validation.ts`), the step (`gradient-step.ts`), the
 * recovery step after a restart (`shard-recovery.ts`), the pulls waiting for a version
 * (`version-waiters.ts`) and the evaluator's snapshots. Plain TypeScript; the gRPC server and
 * the checkpoint scheduler drive it.
 *
 * Every method that refuses a request throws a `ShardError` before changing anything.
 */
export class JobShard {
  readonly jobId: string;
  readonly shard: number;
  readonly specJson: string;
  readonly settings: ShardJobSettings;
  private readonly hooks: JobShardHooks;
  /** Before initialisation it holds no parameters, only the version the job starts at. */
  private readonly params: ShardParameters;
  private readonly ownership: ParameterOwnership;
  private readonly election: InitElection;
  private readonly barrier: SyncBarrier;
  /** The last round announced as waiting (`onRoundWaiting`). */
  private announcedRound = -1;
  /** Where the step time goes (`stepTiming`). */
  private readonly timing = new StepTiming(undefined, (barrierMs, updateMs) =>
    this.hooks.onStepTimed?.(this, barrierMs, updateMs),
  );
  private readonly membership: ShardMembership;
  private readonly validation: PushValidation;
  private readonly waiters: VersionWaiters;
  private readonly snapshots = new SnapshotStore();
  private readonly recovery = new RecoveryStep();

  constructor(options: JobShardOptions) {
    const { jobId, shard, settings } = options;
    const now = options.now ?? Date.now;
    this.jobId = jobId;
    this.shard = shard;
    this.specJson = options.specJson;
    this.settings = settings;
    this.hooks = options.hooks ?? {};
    const kernels = options.kernels ?? defaultKernelBackend();
    this.params = new ShardParameters(options.firstVersion ?? 0, kernels);
    this.ownership = new ParameterOwnership(jobId, shard);
    this.election = new InitElection({ jobId, shard, leaseMs: options.initLeaseMs ?? INIT_LEASE_MS, now });
    this.barrier = new SyncBarrier(settings.minTrainers, kernels, settings.backupTrainers);
    this.membership = new ShardMembership(this.barrier, now);
    this.validation = new PushValidation(
      { jobId, shard, byRound: stepsByRound(settings), maxAhead: settings.maxStaleness },
      this.params,
      this.ownership,
    );
    this.waiters = new VersionWaiters(jobId, shard, this.params);
  }

  /**
   * A job shard resumed from a checkpoint and, when there is one, its progress record: the
   * checkpoint's parameters at the recorded version (never below the checkpoint's), with the
   * recorded members counted from the next version and the recovery step open (see
   * `shard-recovery.ts`).
   */
  static fromCheckpoint(
    data: CheckpointData,
    options: Omit<JobShardOptions, 'jobId' | 'specJson' | 'firstVersion'>,
    progress?: Pick<ProgressRecord, 'version' | 'members'>,
  ): JobShard {
    const job = new JobShard({ ...options, jobId: data.jobId, specJson: data.specJson });
    job.resume(resumedShard(data, options.settings, progress));
    return job;
  }

  /** The shard's model version. */
  get version(): number {
    return this.params.version;
  }

  /** True once the parameters are complete (FinishInit, or a checkpoint). */
  get initialized(): boolean {
    return this.params.initialized;
  }

  /**
   * Records the model's parameter list (every parameter, the learner's order) and the number of
   * shards, from which this shard's own parameters follow (`assignShards`). A different list
   * than before is refused.
   */
  setParamList(params: readonly TensorInfo[], shardCount: number): void {
    this.ownership.record(params, shardCount);
  }

  /**
   * The election. On shard 0 the first caller (or the caller after the holder's lease expired)
   * is elected and holds the init lease; the holder calling again renews it. Other shards never
   * elect: they only learn the job. Also a sign of life for the caller's membership.
   */
  beginInit(trainerId: string): InitElectionResult {
    requireTrainer(trainerId);
    this.touch(trainerId);
    const elected = !this.initialized && this.election.elect(trainerId);
    return {
      elected,
      initialized: this.initialized,
      version: this.version,
      leaseMs: this.election.leaseMs,
      leaseHolder: this.initialized ? '' : this.election.holder,
    };
  }

  /** Checks one init tensor's header before its data is assembled. */
  expectInitTensor(name: string, dtype: DataType, shape: readonly number[]): void {
    this.validation.initHeader(name, dtype, shape);
  }

  /**
   * Stores initial parameters sent by the elected trainer (on shard 0 it must hold the lease,
   * which this renews). All tensors are checked before any is stored.
   */
  initTensors(
    trainerId: string,
    tensors: readonly { name: string; shape: readonly number[]; value: Float32Array }[],
  ): void {
    requireTrainer(trainerId);
    if (this.initialized) throw new AlreadyInitializedError(this.jobId, this.version);
    this.election.requireHolder(trainerId);
    this.validation.initTensors(tensors);
    this.election.stage(trainerId, tensors);
  }

  /**
   * Completes initialisation: every owned parameter must have arrived. The shard is then at
   * version 0 (or its `firstVersion`) with fresh optimizer state. Finishing an initialised
   * shard is a no-op.
   */
  finishInit(trainerId: string): number {
    requireTrainer(trainerId);
    if (this.initialized) return this.version;
    this.election.requireHolder(trainerId);
    const staged = this.election.finish(this.ownership.known ? this.ownership.names() : undefined);
    const { kernel, hyper } = this.settings;
    const { kernels } = this.params;
    this.params.install(
      staged.map((t) => ({
        ...t,
        state: createOptimizerState(kernel, t.value.length, hyper, (n) => kernels.allocate(n)),
      })),
      // Until now the version has been the one the job starts at.
      this.version,
    );
    this.waiters.settle();
    this.hooks.onVersion?.(this, this.version);
    return this.version;
  }

  /**
   * Adds a trainer to the quorum. It counts from the version after the open one (before
   * initialisation, from version 0), and from `atLeast` at the earliest: the other shards may
   * count it from a later version, and a trainer's versions agree on every shard (see
   * `ShardedPserverClient.join`). Joining again is a liveness refresh, which may raise the
   * version it counts from; the open version may then step without it.
   */
  join(trainerId: string, atLeast = 0): { version: number; countedFrom: number } {
    requireTrainer(trainerId);
    if (!Number.isSafeInteger(atLeast) || atLeast < 0) {
      throw new InvalidRequestError('counted_from_at_least', `must be a version (0 or more), got ${atLeast}`);
    }
    this.touch(trainerId);
    const { countedFrom, joined, raised } = this.membership.join(trainerId, this.nextCounted(), atLeast);
    if (joined || raised) this.hooks.onMembership?.(this);
    if (raised) this.maybeStep();
    return { version: this.version, countedFrom };
  }

  /** Removes a trainer from the quorum at once; the open step may complete. */
  leave(trainerId: string): void {
    requireTrainer(trainerId);
    if (this.membership.leave(trainerId)) {
      this.hooks.onMembership?.(this);
      this.maybeStep();
    }
  }

  /**
   * Notes a sign of life from `trainerId`. A member that lapsed is readmitted, counted from the
   * version after the open one, as if it had joined again.
   */
  touch(trainerId: string): void {
    if (this.membership.touch(trainerId, this.nextCounted())) this.hooks.onMembership?.(this);
  }

  /** Notes that a member's step stream was cut; false when `trainerId` is not a member. */
  cut(trainerId: string): boolean {
    return this.membership.cut(trainerId);
  }

  /**
   * Drops members silent for longer than `ttlMs`, or for longer than `cutGraceMs` since their
   * step stream was cut; returns their ids.
   */
  sweep(ttlMs: number, cutGraceMs = ttlMs): string[] {
    const lapsed = this.membership.sweep(ttlMs, cutGraceMs, (id, cut) => this.hooks.onLapse?.(this, id, cut));
    if (lapsed.length > 0) {
      this.hooks.onMembership?.(this);
      this.maybeStep();
    }
    return lapsed;
  }

  /** Refuses a push early when its version cannot be accepted (before its data is read). */
  checkPushVersion(version: number): void {
    this.validation.version(version);
  }

  /** Checks one gradient tensor's header before its data is assembled. */
  expectGradient(name: string, dtype: DataType, shape: readonly number[]): void {
    this.validation.gradientHeader(name, dtype, shape);
  }

  /**
   * Takes one trainer's gradients (or, in `local` mode, parameter deltas) for `version`. When
   * the job steps by rounds (`stepsByRound`) they join the sum of that version (the open one,
   * or in `ssp` one up to `maxStaleness` ahead; a second push by the same trainer for the same
   * version is ignored and answered `accepted: false`) and the step happens once the quorum is
   * complete; otherwise they are applied at once, a staleness-aware asynchronous push with its
   * learning rate divided by how many versions old it is. Every tensor of this shard must be
   * present, with the parameter's shape and finite values.
   */
  push(
    trainerId: string,
    version: number,
    samples: number,
    gradients: ReadonlyMap<string, Float32Array>,
  ): { version: number; accepted: boolean } {
    requireTrainer(trainerId);
    if (this.params.disposed) throw new ShardClosingError(this.shard);
    this.validation.push(version, samples, gradients);
    this.touch(trainerId);
    if (!stepsByRound(this.settings)) {
      const staleness = this.version - version;
      this.hooks.onPush?.(this);
      this.step(gradients, this.settings.stalenessAware ? 1 / Math.max(1, staleness) : 1);
      return { version: this.version, accepted: true };
    }
    const ahead = version - this.version;
    if (this.barrier.hasContributed(trainerId, ahead)) return { version: this.version, accepted: false };
    this.hooks.onPush?.(this);
    this.timing.opened();
    // Elastic differences are summed, each trainer's alike (see `stepRound`).
    this.barrier.add(trainerId, this.settings.elastic ? 1 : samples, gradients, ahead);
    try {
      this.maybeStep();
    } finally {
      // The barrier borrowed the gradients until now (a round of one steps with them as they are).
      this.barrier.settle();
    }
    if (this.settings.firstEndsRound && this.version === version && this.announcedRound !== version) {
      this.announcedRound = version;
      this.hooks.onRoundWaiting?.(this, version);
    }
    return { version: this.version, accepted: true };
  }

  /**
   * A trainer pulls and wants `minVersion`. While the recovery step after a restart is open,
   * wanting a later version takes it (see `shard-recovery.ts`); otherwise nothing happens and
   * the pull waits for the quorum as usual.
   */
  wants(minVersion: number): void {
    if (this.params.disposed || !this.initialized || !this.recovery.stepsForPull(this.version, minVersion)) return;
    this.stepRound();
  }

  /**
   * The version a trainer that pushed for `pushed` needs next, the shard being at `current`
   * after the push: by rounds, the step of its version (in `ssp`, the oldest one it may compute
   * its next version on); otherwise the version after its push.
   */
  nextWanted(pushed: number, current: number): number {
    return stepsByRound(this.settings) ? pushed + 1 - this.settings.maxStaleness : current;
  }

  /** Mean milliseconds per step of the barrier and the update since the last call. */
  stepTiming(): ReturnType<StepTiming['take']> {
    return this.timing.take();
  }

  /** True when `waitForVersion(minVersion)` would resolve at once. */
  reached(minVersion: number): boolean {
    return this.waiters.ready(minVersion);
  }

  /**
   * Resolves once the shard is initialised and at `minVersion` or later; rejects with
   * `WaitTimeoutError` after `waitMs` (at once for 0), or when `signal` aborts.
   */
  waitForVersion(minVersion: number, waitMs: number, signal?: AbortSignal): Promise<void> {
    return this.waiters.wait(minVersion, waitMs, signal);
  }

  /**
   * The current parameters (or a retained snapshot) and their version. The arrays are never
   * written to again nor reused, so the caller may keep them and stream them while steps go on;
   * on the SIMD path that takes one copy per version (see `shard-parameters.ts`), which `lease`
   * avoids.
   */
  read(snapshotVersion?: number): Snapshot {
    if (snapshotVersion !== undefined) {
      const snapshot = this.snapshot(snapshotVersion);
      return { version: snapshot.version, tensors: snapshot.kept() };
    }
    this.requireParameters();
    return { version: this.version, tensors: this.params.tensors() };
  }

  /**
   * As `read`, but without a copy, as the arrays the kernels wrote: they stay as they are,
   * while steps go on and snapshots are dropped, until `release` is called, after which their
   * memory may be reused. The caller releases exactly once nothing reads them any more (for a
   * pull: once every message carrying them is serialized, or the call is cancelled).
   */
  lease(snapshotVersion?: number): ParameterLease {
    if (snapshotVersion !== undefined) return this.snapshot(snapshotVersion).share();
    this.requireParameters();
    return this.params.lease();
  }

  /** Retained snapshot versions, oldest first. */
  snapshotVersions(): number[] {
    return this.snapshots.versions();
  }

  /** The quorum's members with the first version each counts in, for the progress record. */
  members(): RecordedMember[] {
    return this.membership.entries();
  }

  /** A consistent copy of everything a checkpoint holds. */
  capture(): CheckpointData {
    this.requireParameters();
    const values = this.params.tensors();
    return {
      jobId: this.jobId,
      shard: this.shard,
      version: this.version,
      specJson: this.specJson,
      optimizer: this.settings.kernel.name,
      tensors: this.params.all.map((p, i) => ({
        name: p.name,
        shape: [...p.shape],
        value: values[i].data,
        state: p.state.map((s) => s.slice()),
      })),
    };
  }

  /** The job as `Status` reports it. */
  status(): JobShardStatus {
    return {
      jobId: this.jobId,
      version: this.version,
      members: this.membership.memberIds(),
      initialized: this.initialized,
      pendingPushes: this.barrier.pending,
      mode: this.settings.mode,
      tensors: this.initialized ? this.params.all.length : this.election.stagedCount,
    };
  }

  /** Ends every wait with `ShardClosingError`. */
  close(): void {
    this.waiters.close();
  }

  /**
   * Ends every wait and gives the memory of the parameters, the optimizer state and the
   * gradient sums back (the parameters streamed by pulls in flight once those end). Calls that
   * need the parameters fail with `ShardClosingError` afterwards. For a job leaving the process.
   */
  dispose(): void {
    this.close();
    this.snapshots.clear();
    this.params.dispose();
    this.barrier.dispose();
  }

  private resume(resumed: ResumedShard): void {
    this.params.install(resumed.params, resumed.version);
    this.ownership.restore(resumed.params);
    this.membership.restore(resumed.members, resumed.version + 1);
    if (stepsByRound(this.settings)) this.recovery.open(resumed.version);
  }

  /** The retained snapshot of `version`, or `SnapshotNotRetainedError`. */
  private snapshot(version: number): ParameterLease {
    const snapshot = this.snapshots.get(version);
    if (!snapshot) throw new SnapshotNotRetainedError(this.jobId, version, this.snapshots.versions());
    return snapshot;
  }

  /** Refuses a call that needs the parameters before they are installed or after `dispose`. */
  private requireParameters(): void {
    if (this.params.disposed) throw new ShardClosingError(this.shard);
    if (!this.initialized) throw new NotInitializedError(this.jobId, this.shard);
  }

  /** The first version a trainer joining now counts in. */
  private nextCounted(): number {
    return this.initialized ? this.version + 1 : 0;
  }

  /** Takes the steps the barrier is ready for: one, or in `ssp` those of later versions too. */
  private maybeStep(): void {
    for (;;) {
      if (!this.initialized || this.params.disposed) return;
      const recovering = this.recovery.stepsWithoutQuorum(this.version, this.barrier.pending);
      if (!recovering && !this.barrier.ready(this.version)) return;
      this.stepRound();
    }
  }

  /**
   * Steps with the open version's contributions (none: the version only advances). An elastic
   * round moves the center by the sum of the trainers' elastic differences, the others by
   * their average.
   */
  private stepRound(): void {
    const { average, contributors } = this.barrier.take();
    this.recovery.close();
    this.step(average.size > 0 ? average : undefined, this.settings.elastic ? contributors.length : 1);
  }

  /**
   * One step (`gradient-step.ts`: an optimizer step, or in `local` mode a delta added, either
   * scaled by `scale`), then what follows a new version: snapshot, waiters, hooks.
   */
  private step(updates: ReadonlyMap<string, Float32Array> | undefined, scale = 1): void {
    const version = this.timing.update(() =>
      this.settings.mode === 'local'
        ? addDeltas(this.params, updates, scale)
        : takeStep(this.params, updates, this.settings, scale),
    );
    if (SnapshotStore.due(version, this.settings.evaluationEverySteps)) {
      this.snapshots.add(this.params.lease());
      this.hooks.onSnapshot?.(this, version);
    }
    this.waiters.settle();
    this.hooks.onVersion?.(this, version);
  }
}
