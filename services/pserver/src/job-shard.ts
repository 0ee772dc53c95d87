/*
 * Recovery of a restarted shard, and why its version never goes back.
 *
 * A shard keeps two things on disk per job: checkpoints (parameters, optimizer state, version;
 * every `checkpoint.everySteps` steps or `checkpoint.everySeconds`, and on shutdown) and the
 * progress record (`progress-record.ts`: the version and the quorum, rewritten on every step and
 * every membership change, before either is visible to a trainer).
 *
 * A shard that restarts resumes each job from its latest intact checkpoint, taken at version
 * v_c, and from its progress record, which says the version v_r >= v_c it had reached. It then
 * serves the checkpoint's parameters as version v_r and goes on counting from there:
 *
 * - The version a trainer or the evaluator sees never decreases, and every version a trainer
 *   holds is one the shard accepts: a trainer that pulled v_r pushes for v_r and is taken; one
 *   whose push was cut off by the crash sends it again (the client retries it).
 * - The shards of a synchronous job keep the same version numbers, so pulls that want every
 *   shard at one version keep working; the other shards lose nothing.
 * - The cost: this shard's slice of the model lost the updates of steps v_c+1..v_r (at most one
 *   checkpoint interval). Training goes on from those slightly older values, as if those steps
 *   had made smaller updates to this slice; SGD absorbs such a perturbation, and the evaluator
 *   judges the model as it is. Checkpoint more often (`checkpoint.everySteps`) to lose less.
 * - The gradients of the open step died with the process. Trainers whose push was answered
 *   before the crash are waiting for version v_r + 1 and will not push again, so the first step
 *   after a restart (the recovery step) does not wait for the quorum: it is taken as soon as one
 *   push for v_r arrives, and the other pushes for v_r are refused as stale and recomputed. A
 *   pull that wants a later version before any such push arrives takes it too, without an
 *   update (one more lost step): when every trainer is waiting for the next version, no push
 *   for v_r will come, and the other shards may already be there.
 *   The recorded members are members again, counted from v_r + 1, so later steps wait for all
 *   of them as before; a member that does not come back lapses after the member TTL.
 * - A job whose checkpoints are all lost is initialised again by the election, and its version
 *   starts from the recorded one rather than from 0.
 */

import { assignShards, dataTypeName, elementCount, sameShape, DataType, type TensorInfo } from '#libs/pserver-protocol';
import { createOptimizerState } from '#libs/optimizer';
import type { CheckpointData } from './checkpoint.js';
import {
  AlreadyInitializedError,
  GradientVersionError,
  IncompleteInitError,
  InitLeaseHeldError,
  InvalidRequestError,
  InvalidTensorError,
  NotInitializedError,
  ShardClosingError,
  SnapshotNotRetainedError,
  WaitTimeoutError,
} from './errors.js';
import type { ShardJobSettings } from './job-settings.js';
import type { ProgressRecord, RecordedMember } from './progress-record.js';
import { SnapshotStore, type Snapshot } from './snapshot-store.js';
import { SyncBarrier } from './sync-barrier.js';

/** How long the elected trainer holds the init lease without renewing it. */
export const INIT_LEASE_MS = 60_000;

/** Things a job shard tells its owner about. */
export interface JobShardHooks {
  /** The shard's version advanced (a step), or the parameters were initialised (version 0). */
  onVersion?(job: JobShard, version: number): void;
  /** A snapshot for the evaluator was retained at `version`. */
  onSnapshot?(job: JobShard, version: number): void;
  /** A member was dropped for silence. */
  onLapse?(job: JobShard, trainerId: string): void;
  /** The quorum's members changed (join, leave, lapse, readmission). */
  onMembership?(job: JobShard): void;
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
}

/** What `beginInit` answers. */
export interface InitElectionResult {
  elected: boolean;
  initialized: boolean;
  version: number;
  leaseMs: number;
  leaseHolder: string;
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

interface Param {
  name: string;
  shape: number[];
  /** Current values; replaced (never written into) on each step, so readers may keep it. */
  value: Float32Array;
  state: Float32Array[];
}

interface Waiter {
  minVersion: number;
  resolve: () => void;
  reject: (err: Error) => void;
}

/**
 * One job's slice of the parameters on one shard: initialisation (with the election on shard 0),
 * the synchronous quorum or asynchronous updates, the optimizer, versions and snapshots. Plain
 * TypeScript; the gRPC server and the checkpoint scheduler drive it.
 *
 * Every method that refuses a request throws a `ShardError` before changing anything.
 */
export class JobShard {
  readonly jobId: string;
  readonly shard: number;
  readonly specJson: string;
  readonly settings: ShardJobSettings;
  private readonly now: () => number;
  private readonly leaseMs: number;
  private readonly hooks: JobShardHooks;
  private readonly barrier: SyncBarrier;
  private readonly snapshots = new SnapshotStore();
  private readonly lastSeen = new Map<string, number>();
  /** Members dropped for silence; one that calls again is a member again from the next version. */
  private readonly lapsed = new Set<string>();
  private readonly waiters = new Set<Waiter>();
  /** Parameters this shard owns per the model's parameter list; undefined until one arrives. */
  private owned?: Map<string, number[]>;
  private lease?: { holder: string; expiresAt: number };
  private readonly pendingInit = new Map<string, { shape: number[]; value: Float32Array }>();
  private params: Param[] = [];
  private readonly paramIndex = new Map<string, Param>();
  private currentVersion = 0;
  private readonly firstVersion: number;
  private isInitialized = false;
  private closed = false;
  /** The version of the recovery step after a restart (see the top of this file), if still open. */
  private recoveringAt?: number;

  constructor(options: JobShardOptions) {
    this.jobId = options.jobId;
    this.shard = options.shard;
    this.specJson = options.specJson;
    this.settings = options.settings;
    this.now = options.now ?? Date.now;
    this.leaseMs = options.initLeaseMs ?? INIT_LEASE_MS;
    this.hooks = options.hooks ?? {};
    this.barrier = new SyncBarrier(options.settings.minTrainers);
    this.firstVersion = options.firstVersion ?? 0;
    this.currentVersion = this.firstVersion;
  }

  /**
   * A job shard resumed from a checkpoint and, when there is one, its progress record: the
   * checkpoint's parameters at the recorded version (never below the checkpoint's), with the
   * recorded members counted from the next version and the recovery step open.
   */
  static fromCheckpoint(
    data: CheckpointData,
    options: Omit<JobShardOptions, 'jobId' | 'specJson' | 'firstVersion'>,
    progress?: Pick<ProgressRecord, 'version' | 'members'>,
  ): JobShard {
    const job = new JobShard({ ...options, jobId: data.jobId, specJson: data.specJson });
    const kernel = options.settings.kernel;
    const stateMatches = data.optimizer === kernel.name;
    job.setParams(
      data.tensors.map((t) => ({
        name: t.name,
        shape: t.shape,
        value: t.value,
        state:
          stateMatches && t.state.length === kernel.stateSlots.length
            ? t.state
            : createOptimizerState(kernel, t.value.length),
      })),
    );
    job.owned = new Map(data.tensors.map((t) => [t.name, t.shape]));
    job.currentVersion = Math.max(data.version, progress?.version ?? 0);
    job.isInitialized = true;
    const now = job.now();
    for (const m of progress?.members ?? []) {
      job.barrier.join(m.trainerId, Math.max(m.countedFrom, job.currentVersion + 1));
      job.lastSeen.set(m.trainerId, now);
    }
    if (options.settings.mode === 'sync') job.recoveringAt = job.currentVersion;
    return job;
  }

  /** The shard's model version. */
  get version(): number {
    return this.currentVersion;
  }

  /** True once the parameters are complete (FinishInit, or a checkpoint). */
  get initialized(): boolean {
    return this.isInitialized;
  }

  /**
   * Records the model's parameter list (every parameter, the learner's order) and the number of
   * shards, from which this shard's own parameters follow (`assignShards`). A different list
   * than before is refused.
   */
  setParamList(params: readonly TensorInfo[], shardCount: number): void {
    if (params.length === 0) return;
    if (!Number.isInteger(shardCount) || shardCount <= this.shard) {
      throw new InvalidRequestError('shard_count', `${shardCount} shards cannot include shard ${this.shard}`);
    }
    let map;
    try {
      map = assignShards(
        params.map((p) => ({ name: p.name, size: elementCount(p.shape) })),
        shardCount,
      );
    } catch (cause) {
      throw new InvalidRequestError('params', (cause as Error).message, { cause });
    }
    const owned = new Map<string, number[]>();
    for (const p of params) {
      if (map.shardOf(p.name) !== this.shard) continue;
      if (p.dtype !== DataType.FLOAT32) {
        throw new InvalidTensorError(
          p.name,
          `parameter "${p.name}" is ${dataTypeName(p.dtype)}; only float32 parameters are trainable`,
        );
      }
      owned.set(p.name, [...p.shape]);
    }
    if (this.owned) {
      const differs =
        owned.size !== this.owned.size ||
        [...owned].some(([name, shape]) => !sameShape(shape, this.owned!.get(name) ?? [-1]));
      if (differs) {
        throw new InvalidRequestError(
          'params',
          `job ${this.jobId}: this shard's parameters would be [${describe(owned)}], but the job has [${describe(this.owned)}]`,
        );
      }
      return;
    }
    this.owned = owned;
  }

  /**
   * The election. On shard 0 the first caller (or the caller after the holder's lease expired)
   * is elected and holds the init lease; the holder calling again renews it. Other shards never
   * elect: they only learn the job. Also a sign of life for the caller's membership.
   */
  beginInit(trainerId: string): InitElectionResult {
    this.requireTrainer(trainerId);
    this.touch(trainerId);
    const reply = (elected: boolean): InitElectionResult => ({
      elected,
      initialized: this.isInitialized,
      version: this.currentVersion,
      leaseMs: this.leaseMs,
      leaseHolder: this.lease && !this.isInitialized ? this.lease.holder : '',
    });
    if (this.isInitialized || this.shard !== 0) return reply(false);
    const now = this.now();
    if (this.lease && this.lease.holder !== trainerId && this.lease.expiresAt > now) return reply(false);
    this.lease = { holder: trainerId, expiresAt: now + this.leaseMs };
    return reply(true);
  }

  /** Checks one init tensor's header before its data is assembled. */
  expectInitTensor(name: string, dtype: DataType, shape: readonly number[]): void {
    if (this.isInitialized) throw new AlreadyInitializedError(this.jobId, this.currentVersion);
    this.expectOwned(name, dtype, shape, 'init');
  }

  /**
   * Stores initial parameters sent by the elected trainer (on shard 0 it must hold the lease,
   * which this renews). All tensors are checked before any is stored.
   */
  initTensors(
    trainerId: string,
    tensors: readonly { name: string; shape: readonly number[]; value: Float32Array }[],
  ): void {
    this.requireTrainer(trainerId);
    if (this.isInitialized) throw new AlreadyInitializedError(this.jobId, this.currentVersion);
    this.requireLease(trainerId);
    for (const t of tensors) {
      this.expectOwned(t.name, DataType.FLOAT32, t.shape, 'init');
      if (elementCount(t.shape) !== t.value.length) {
        throw new InvalidTensorError(
          t.name,
          `init "${t.name}": shape [${t.shape.join(', ')}] but ${t.value.length} values`,
        );
      }
      requireFinite(t.name, t.value, 'init');
    }
    for (const t of tensors) this.pendingInit.set(t.name, { shape: [...t.shape], value: t.value });
    this.renewLease(trainerId);
  }

  /**
   * Completes initialisation: every owned parameter must have arrived. The shard is then at
   * version 0 (or its `firstVersion`) with zeroed optimizer state. Finishing an initialised
   * shard is a no-op.
   */
  finishInit(trainerId: string): number {
    this.requireTrainer(trainerId);
    if (this.isInitialized) return this.currentVersion;
    this.requireLease(trainerId);
    if (this.owned) {
      const missing = [...this.owned.keys()].filter((n) => !this.pendingInit.has(n));
      if (missing.length > 0) throw new IncompleteInitError(this.jobId, missing);
    }
    const order = this.owned ? [...this.owned.keys()] : [...this.pendingInit.keys()];
    this.setParams(
      order.map((name) => {
        const t = this.pendingInit.get(name)!;
        return {
          name,
          shape: t.shape,
          value: t.value,
          state: createOptimizerState(this.settings.kernel, t.value.length),
        };
      }),
    );
    this.pendingInit.clear();
    this.lease = undefined;
    this.currentVersion = this.firstVersion;
    this.isInitialized = true;
    this.settle();
    this.hooks.onVersion?.(this, this.currentVersion);
    return this.currentVersion;
  }

  /**
   * Adds a trainer to the quorum. It counts from the version after the open one; before
   * initialisation, from version 0. Joining again is a liveness refresh.
   */
  join(trainerId: string): { version: number; countedFrom: number } {
    this.requireTrainer(trainerId);
    this.touch(trainerId);
    const joined = !this.barrier.isMember(trainerId);
    const countedFrom = this.barrier.join(trainerId, this.isInitialized ? this.currentVersion + 1 : 0);
    if (joined) this.hooks.onMembership?.(this);
    return { version: this.currentVersion, countedFrom };
  }

  /** Removes a trainer from the quorum at once; the open step may complete. */
  leave(trainerId: string): void {
    this.requireTrainer(trainerId);
    this.lastSeen.delete(trainerId);
    this.lapsed.delete(trainerId);
    if (this.barrier.leave(trainerId)) {
      this.hooks.onMembership?.(this);
      this.maybeStep();
    }
  }

  /**
   * Notes a sign of life from `trainerId`. A member that lapsed is readmitted, counted from the
   * version after the open one, as if it had joined again.
   */
  touch(trainerId: string): void {
    if (!trainerId) return;
    this.lastSeen.set(trainerId, this.now());
    if (this.lapsed.delete(trainerId)) {
      this.barrier.join(trainerId, this.isInitialized ? this.currentVersion + 1 : 0);
      this.hooks.onMembership?.(this);
    }
  }

  /** Drops members silent for longer than `ttlMs`; returns their ids. */
  sweep(ttlMs: number): string[] {
    const now = this.now();
    const lapsed = this.barrier.memberIds().filter((id) => now - (this.lastSeen.get(id) ?? 0) > ttlMs);
    for (const id of lapsed) {
      this.barrier.leave(id);
      this.lastSeen.delete(id);
      this.lapsed.add(id);
      this.hooks.onLapse?.(this, id);
    }
    if (lapsed.length > 0) {
      this.hooks.onMembership?.(this);
      this.maybeStep();
    }
    return lapsed;
  }

  /** Refuses a push early when its version cannot be accepted (before its data is read). */
  checkPushVersion(version: number): void {
    if (!this.isInitialized) throw new NotInitializedError(this.jobId, this.shard);
    const v = this.currentVersion;
    if (version > v || (this.settings.mode === 'sync' && version < v)) {
      throw new GradientVersionError(this.jobId, version, v);
    }
  }

  /** Checks one gradient tensor's header before its data is assembled. */
  expectGradient(name: string, dtype: DataType, shape: readonly number[]): void {
    if (!this.isInitialized) throw new NotInitializedError(this.jobId, this.shard);
    this.expectOwned(name, dtype, shape, 'gradient');
  }

  /**
   * Takes one trainer's gradients for `version`. In synchronous mode they join the open
   * version's sum (a second push by the same trainer for the same version is ignored and
   * answered `accepted: false`) and the step happens once the quorum is complete; in
   * asynchronous mode they are applied at once. Every gradient of this shard must be present,
   * with the parameter's shape and finite values.
   */
  push(
    trainerId: string,
    version: number,
    samples: number,
    gradients: ReadonlyMap<string, Float32Array>,
  ): { version: number; accepted: boolean } {
    this.requireTrainer(trainerId);
    this.checkPushVersion(version);
    if (!Number.isInteger(samples) || samples < 1) {
      throw new InvalidRequestError('samples', `expected a positive integer, got ${samples}`);
    }
    for (const name of gradients.keys()) {
      if (!this.paramIndex.has(name)) throw this.unknownParam(name, 'gradient');
    }
    const missing = this.params.filter((p) => !gradients.has(p.name)).map((p) => p.name);
    if (missing.length > 0) {
      throw new InvalidTensorError(missing[0], `push is missing gradients for: ${missing.join(', ')}`);
    }
    for (const p of this.params) {
      const g = gradients.get(p.name)!;
      if (g.length !== p.value.length) {
        throw new InvalidTensorError(p.name, `gradient "${p.name}" has ${g.length} values, expected ${p.value.length}`);
      }
      requireFinite(p.name, g, 'gradient');
    }
    this.touch(trainerId);
    if (this.settings.mode === 'async') {
      this.step(gradients);
      return { version: this.currentVersion, accepted: true };
    }
    if (this.barrier.hasContributed(trainerId)) return { version: this.currentVersion, accepted: false };
    this.barrier.add(trainerId, samples, gradients);
    this.maybeStep();
    return { version: this.currentVersion, accepted: true };
  }

  /**
   * A trainer pulls and wants `minVersion`. While the recovery step after a restart is open,
   * wanting a later version takes it (see the top of this file); otherwise nothing happens and
   * the pull waits for the quorum as usual.
   */
  wants(minVersion: number): void {
    if (this.recoveringAt === undefined || this.recoveringAt !== this.currentVersion) return;
    if (!this.isInitialized || minVersion <= this.currentVersion) return;
    this.recoveringAt = undefined;
    if (this.barrier.pending > 0) this.step(this.barrier.take().average);
    else this.step(undefined);
  }

  /**
   * Resolves once the shard is initialised and at `minVersion` or later; rejects with
   * `WaitTimeoutError` after `waitMs` (at once for 0), or when `signal` aborts.
   */
  waitForVersion(minVersion: number, waitMs: number, signal?: AbortSignal): Promise<void> {
    if (this.closed) return Promise.reject(new ShardClosingError(this.shard));
    if (this.isInitialized && this.currentVersion >= minVersion) return Promise.resolve();
    if (waitMs <= 0) {
      return Promise.reject(new WaitTimeoutError(this.jobId, minVersion, this.currentVersion, waitMs));
    }
    return new Promise((resolve, reject) => {
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        this.waiters.delete(waiter);
      };
      const waiter: Waiter = {
        minVersion,
        resolve: () => {
          done();
          resolve();
        },
        reject: (err) => {
          done();
          reject(err);
        },
      };
      const timer = setTimeout(
        () => waiter.reject(new WaitTimeoutError(this.jobId, minVersion, this.currentVersion, waitMs)),
        waitMs,
      );
      const onAbort = () => waiter.reject(signal?.reason instanceof Error ? signal.reason : new Error('aborted'));
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiters.add(waiter);
    });
  }

  /**
   * The current parameters (or a retained snapshot) and their version. The arrays are never
   * written to again, so the caller may stream them while steps go on.
   */
  read(snapshotVersion?: number): Snapshot {
    if (snapshotVersion !== undefined) {
      const snapshot = this.snapshots.get(snapshotVersion);
      if (!snapshot) throw new SnapshotNotRetainedError(this.jobId, snapshotVersion, this.snapshots.versions());
      return snapshot;
    }
    if (!this.isInitialized) throw new NotInitializedError(this.jobId, this.shard);
    return {
      version: this.currentVersion,
      tensors: this.params.map(({ name, shape, value }) => ({ name, shape, data: value })),
    };
  }

  /** Retained snapshot versions, oldest first. */
  snapshotVersions(): number[] {
    return this.snapshots.versions();
  }

  /** The quorum's members with the first version each counts in, for the progress record. */
  members(): RecordedMember[] {
    return this.barrier.entries();
  }

  /** A consistent copy of everything a checkpoint holds. */
  capture(): CheckpointData {
    if (!this.isInitialized) throw new NotInitializedError(this.jobId, this.shard);
    return {
      jobId: this.jobId,
      shard: this.shard,
      version: this.currentVersion,
      specJson: this.specJson,
      optimizer: this.settings.kernel.name,
      tensors: this.params.map((p) => ({
        name: p.name,
        shape: [...p.shape],
        value: p.value,
        state: p.state.map((s) => s.slice()),
      })),
    };
  }

  /** The job as `Status` reports it. */
  status(): JobShardStatus {
    return {
      jobId: this.jobId,
      version: this.currentVersion,
      members: this.barrier.memberIds(),
      initialized: this.isInitialized,
      pendingPushes: this.barrier.pending,
      mode: this.settings.mode,
      tensors: this.isInitialized ? this.params.length : this.pendingInit.size,
    };
  }

  /** Ends every wait with `ShardClosingError`. */
  close(): void {
    this.closed = true;
    for (const w of [...this.waiters]) w.reject(new ShardClosingError(this.shard));
  }

  private setParams(params: Param[]): void {
    this.params = params;
    this.paramIndex.clear();
    for (const p of params) this.paramIndex.set(p.name, p);
  }

  private maybeStep(): void {
    if (!this.isInitialized) return;
    const recovering = this.recoveringAt === this.currentVersion && this.barrier.pending > 0;
    if (!recovering && !this.barrier.ready(this.currentVersion)) return;
    const { average } = this.barrier.take();
    this.recoveringAt = undefined;
    this.step(average);
  }

  /**
   * Applies one update to every parameter and advances the version; without gradients (a
   * recovery step nobody pushed to), only the version advances.
   */
  private step(gradients: ReadonlyMap<string, Float32Array> | undefined): void {
    const { kernel, hyper } = this.settings;
    const step = this.currentVersion + 1;
    if (gradients) {
      for (const p of this.params) {
        const next = p.value.slice();
        kernel.apply(next, gradients.get(p.name)!, p.state, hyper, step);
        p.value = next;
      }
    }
    this.currentVersion = step;
    if (SnapshotStore.due(step, this.settings.evaluationEverySteps)) {
      this.snapshots.add(this.read());
      this.hooks.onSnapshot?.(this, step);
    }
    this.settle();
    this.hooks.onVersion?.(this, step);
  }

  /** Wakes the pulls waiting for a version that is now reached. */
  private settle(): void {
    for (const w of [...this.waiters]) if (this.currentVersion >= w.minVersion) w.resolve();
  }

  private expectOwned(name: string, dtype: DataType, shape: readonly number[], what: 'init' | 'gradient'): void {
    const expected = this.isInitialized ? this.paramIndex.get(name)?.shape : this.owned?.get(name);
    if (this.isInitialized || this.owned) {
      if (!expected) throw this.unknownParam(name, what);
    }
    if (dtype !== DataType.FLOAT32) {
      throw new InvalidTensorError(name, `${what} "${name}": expected float32, got ${dataTypeName(dtype)}`);
    }
    if (expected && !sameShape(expected, shape)) {
      throw new InvalidTensorError(
        name,
        `${what} "${name}": expected shape [${expected.join(', ')}], got [${shape.join(', ')}]`,
      );
    }
  }

  private unknownParam(name: string, what: string): InvalidTensorError {
    const known = this.isInitialized ? [...this.paramIndex.keys()] : [...(this.owned?.keys() ?? [])];
    return new InvalidTensorError(
      name,
      `${what} "${name}" is not a parameter of shard ${this.shard} for job ${this.jobId} (its parameters: ${known.join(', ') || 'none'})`,
    );
  }

  private requireTrainer(trainerId: string): void {
    if (!trainerId) throw new InvalidRequestError('trainer_id', 'must not be empty');
  }

  private requireLease(trainerId: string): void {
    if (this.shard !== 0) return;
    const lease = this.lease;
    if (!lease) throw new InitLeaseHeldError(this.jobId, '', trainerId);
    if (lease.holder !== trainerId) throw new InitLeaseHeldError(this.jobId, lease.holder, trainerId);
  }

  private renewLease(trainerId: string): void {
    if (this.shard === 0 && this.lease?.holder === trainerId) this.lease.expiresAt = this.now() + this.leaseMs;
  }
}

function requireFinite(name: string, values: Float32Array, what: string): void {
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    // v - v is 0 for every finite v and NaN for NaN and the infinities; no global lookups in
    // the loop, which are slow in a vm context such as a test runner's.
    if (v - v !== 0) {
      throw new InvalidTensorError(name, `${what} "${name}" has a non-finite value ${v} at index ${i}`);
    }
  }
}

function describe(params: ReadonlyMap<string, readonly number[]>): string {
  return [...params].map(([n, s]) => `${n} [${s.join(', ')}]`).join(', ');
}
