import { existsSync, mkdirSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { PathOutsideRootsError, confinePath } from '#libs/config';
import { JOB_ID_PATTERN } from '#libs/messaging';
import type { KernelBackend } from '#libs/optimizer';
import { wireClock, type TensorInfo } from '#libs/pserver-protocol';
import { writeCheckpoint, type CheckpointRecord } from './checkpoint.js';
import { CheckpointError, InvalidRequestError, JobUnknownToShardError } from './errors.js';
import type { InitElectionResult } from './init-election.js';
import { JobShard } from './job-shard.js';
import type { LineLogger } from '#libs/logging';
import { parseJobSettings } from './job-settings.js';
import { syncProgressRecord } from './progress-record.js';
import { ShardRecovery, describeResume } from './shard-recovery.js';
import type { ShardActivity } from './pserver-metrics.js';

/**
 * How long a member may stay silent before it is dropped from the quorum: the longest a
 * synchronous step waits for a trainer that died without leaving. Trainers holding a task join
 * again every 2 s (`TRAINER_QUORUM_HEARTBEAT_MS`), so only the dead lapse.
 */
export const QUORUM_MEMBER_LAPSE_MS = 10_000;
/**
 * How long a member whose step stream was cut (the client cancelled it, or the connection
 * closed, as when the trainer's process died) may stay silent before it lapses: two of the
 * trainers' default heartbeats, so a live trainer that reset its stream calls again well within
 * it, and a SIGKILLed one holds up steps for this long instead of the whole member TTL.
 */
export const QUORUM_CUT_GRACE_MS = 4_000;
/** How often the time-based checkpoint rule is looked at. */
export const CHECKPOINT_TICK_MS = 1_000;

/** Settings of a `ParameterShard`. */
export interface ParameterShardOptions {
  /** This process's shard index. */
  shard: number;
  /** Checkpoints go to `<dataDir>/<jobId>/`. */
  dataDir: string;
  /** Silence after which a member lapses. Default `QUORUM_MEMBER_LAPSE_MS`. */
  memberTtlMs?: number;
  /**
   * Silence after its step stream was cut after which a member lapses. Default
   * `QUORUM_CUT_GRACE_MS`; never longer than the member TTL.
   */
  cutGraceMs?: number;
  /** How long the elected trainer holds the init lease. */
  initLeaseMs?: number;
  /**
   * Called when a snapshot for the evaluator is retained; like `onRoundWaiting`, an announcement
   * (see `announce`), made once the answers of the step are written.
   */
  onSnapshot?: (jobId: string, shard: number, version: number) => void;
  /** A `roundEnd: first` round on `version` waits for more trainers (`JobShardHooks.onRoundWaiting`). */
  onRoundWaiting?: (jobId: string, shard: number, version: number) => void;
  logger?: LineLogger;
  now?: () => number;
  /** Where every job's optimizer steps and gradient sums run. Default: what `TRIBUTARY_KERNELS` picks. */
  kernels?: KernelBackend;
  /** Told of every push taken and step timed (the Prometheus metrics). */
  metrics?: ShardActivity;
}

/** A BeginInit request as the shard sees it. */
export interface BeginInitInput {
  jobId: string;
  trainerId: string;
  specJson: string;
  params: readonly TensorInfo[];
  shardCount: number;
}

interface CheckpointState {
  savedVersion: number;
  savedAt: number;
  /** The save in flight, if any; saves of one job run one after another. */
  chain: Promise<unknown>;
}

const silent: LineLogger = { log: () => undefined, warn: () => undefined, error: () => undefined };

/**
 * Every job's slice of the parameters held by this process: creates a job on its first
 * BeginInit, resumes one from its checkpoint directory (`preload` at start, or the first time
 * any call names it; see `shard-recovery.ts`), drops silent members, keeps each job's progress
 * record current, and checkpoints each job by steps, by time, on request, when it stops
 * (`retire`) and on shutdown.
 */
export class ParameterShard {
  readonly shard: number;
  private readonly jobs = new Map<string, JobShard>();
  /** The wire clock at the last `stepPhases`. */
  private wireMark = wireClock.read();
  private readonly loading = new Map<string, Promise<JobShard | undefined>>();
  private readonly checkpoints = new Map<string, CheckpointState>();
  private readonly memberTtlMs: number;
  private readonly cutGraceMs: number;
  private readonly logger: LineLogger;
  private readonly now: () => number;
  private readonly recovery: ShardRecovery;
  /** Jobs that stopped and were dropped from memory; calls naming them find no job. */
  private readonly retired = new Set<string>();
  private timers: NodeJS.Timeout[] = [];
  private closed = false;
  /** Set when this process no longer owns the shard: nothing is written any more. */
  private fenced = false;

  constructor(private readonly options: ParameterShardOptions) {
    this.shard = options.shard;
    this.memberTtlMs = options.memberTtlMs ?? QUORUM_MEMBER_LAPSE_MS;
    this.cutGraceMs = Math.min(options.cutGraceMs ?? QUORUM_CUT_GRACE_MS, this.memberTtlMs);
    this.logger = options.logger ?? silent;
    this.now = options.now ?? Date.now;
    this.recovery = new ShardRecovery({
      shard: this.shard,
      jobDir: (jobId) => this.jobDir(jobId),
      logger: this.logger,
    });
  }

  /** Starts the liveness sweep and the time-based checkpoints. */
  start(): void {
    const sweepEveryMs = Math.max(50, Math.min(5_000, Math.floor(this.memberTtlMs / 3)));
    this.timers.push(
      setInterval(() => this.sweep(), sweepEveryMs),
      setInterval(() => this.checkpointByTime(), CHECKPOINT_TICK_MS),
    );
    for (const t of this.timers) t.unref();
  }

  /** The checkpoint directory of a job. */
  jobDir(jobId: string): string {
    return join(this.options.dataDir, jobId);
  }

  /** Ids of the jobs in memory. */
  jobIds(): string[] {
    return [...this.jobs.keys()];
  }

  /**
   * BeginInit: creates the job (or resumes it from a checkpoint), records the parameter list,
   * and runs the election (shard 0).
   */
  async beginInit(input: BeginInitInput): Promise<InitElectionResult> {
    let job = await this.find(input.jobId);
    if (!job) {
      const settings = parseJobSettings(input.specJson);
      job = this.jobs.get(input.jobId);
      if (!job) {
        job = this.createJob(input.jobId, input.specJson, settings);
        this.logger.log(
          `job ${input.jobId}: created on shard ${this.shard} (${settings.mode}, ${settings.kernel.name})`,
        );
      }
    }
    job.setParamList(input.params, input.shardCount);
    return job.beginInit(input.trainerId);
  }

  /**
   * Completes a job's initialisation (FinishInit) and resolves once its initial parameters are
   * checkpointed, so a version a trainer is told about can always be resumed.
   */
  async finishInit(jobId: string, trainerId: string): Promise<number> {
    const job = await this.job(jobId);
    const first = !job.initialized;
    const version = job.finishInit(trainerId);
    if (first) await this.saveJob(job, this.jobDir(jobId), true);
    return version;
  }

  /**
   * Resumes the given jobs from their checkpoint directories now, those that have one; a job
   * that cannot be resumed is logged and left to the election. Call before serving, so that
   * the first calls after a restart find their jobs.
   */
  async preload(jobIds: Iterable<string>): Promise<string[]> {
    const resumed: string[] = [];
    for (const jobId of jobIds) {
      if (!JOB_ID_PATTERN.test(jobId) || !existsSync(this.jobDir(jobId))) continue;
      try {
        if (await this.find(jobId)) resumed.push(jobId);
      } catch (err) {
        this.logger.error(`job ${jobId}: cannot resume: ${(err as Error).message}`);
      }
    }
    return resumed;
  }

  /**
   * Drops a stopped job from memory, its kernel memory included, after a last checkpoint; later
   * calls naming it find no job until `reinstate`. Its checkpoints stay on disk.
   */
  async retire(jobId: string): Promise<void> {
    this.retired.add(jobId);
    const job = this.jobs.get(jobId);
    if (!job) return;
    const state = this.checkpoints.get(jobId);
    if (job.initialized && state && state.savedVersion !== job.version) {
      await this.saveJob(job, this.jobDir(jobId)).catch((err: Error) =>
        this.logger.error(`job ${jobId}: final checkpoint failed: ${err.message}`),
      );
    }
    await state?.chain;
    job.dispose();
    this.jobs.delete(jobId);
    this.checkpoints.delete(jobId);
    this.recovery.forget(jobId);
    this.logger.log(`job ${jobId}: stopped; checkpointed at version ${job.version} and dropped from memory`);
  }

  /**
   * Forgets a job for good (its retention ran out): drops it from memory and deletes its
   * checkpoint directory. A job of that id that runs again starts afresh.
   */
  async discard(jobId: string): Promise<void> {
    if (!JOB_ID_PATTERN.test(jobId)) return;
    await this.retire(jobId);
    if (this.fenced) return;
    await rm(this.jobDir(jobId), { recursive: true, force: true });
    this.retired.delete(jobId);
    this.logger.log(`job ${jobId}: past its retention; checkpoints removed`);
  }

  /** Lets calls name a retired job again (a job of that id runs again); it resumes from disk. */
  reinstate(jobId: string): void {
    this.retired.delete(jobId);
  }

  /**
   * This process lost the shard to another one: stop writing anything (checkpoints, progress
   * records) and end every wait. The owner exits after this.
   */
  fence(): void {
    this.fenced = true;
    this.closed = true;
    for (const t of this.timers) clearInterval(t);
    this.timers = [];
    for (const job of this.jobs.values()) job.close();
    this.recovery.forgetAll();
  }

  /** The job, from memory or from its checkpoint; `JobUnknownToShardError` when neither has it. */
  async job(jobId: string): Promise<JobShard> {
    const job = await this.find(jobId);
    if (!job) throw new JobUnknownToShardError(jobId, this.shard);
    return job;
  }

  /**
   * Checkpoints a job now, to `path` when given (a directory) or to its own directory; resolves
   * with the data file written.
   */
  async save(jobId: string, path?: string): Promise<{ path: string; version: number }> {
    const job = await this.job(jobId);
    const dir = path ? await this.savePath(path) : this.jobDir(jobId);
    const record = (await this.saveJob(job, dir, true))!;
    return { path: join(dir, record.file), version: record.version };
  }

  /**
   * A `Save` directory, made absolute against the data directory; refused unless it resolves
   * (links included) inside the data directory, so a caller can write nowhere else.
   */
  private async savePath(path: string): Promise<string> {
    const dir = resolve(this.options.dataDir, path);
    try {
      await confinePath(dir, [this.options.dataDir], { field: 'path', variable: 'PSERVER_DATA_DIR' });
    } catch (err) {
      if (!(err instanceof PathOutsideRootsError)) throw err;
      throw new InvalidRequestError(
        'Save',
        `path ${JSON.stringify(path)} is outside the shard's data directory (PSERVER_DATA_DIR)`,
      );
    }
    return dir;
  }

  /** Checkpoints a job in memory now if it changed since its last checkpoint (a job that stopped). */
  async checkpointIfChanged(jobId: string): Promise<void> {
    const job = this.jobs.get(jobId);
    const state = this.checkpoints.get(jobId);
    if (!job?.initialized || !state || state.savedVersion === job.version) return;
    await this.saveJob(job, this.jobDir(jobId)).catch((err: Error) =>
      this.logger.error(`job ${jobId}: checkpoint failed: ${err.message}`),
    );
  }

  /** Each job's version. */
  versions(): Record<string, number> {
    return Object.fromEntries([...this.jobs.values()].map((j) => [j.jobId, j.version]));
  }

  /** How many trainers each job's quorum counts. */
  memberCounts(): Record<string, number> {
    return Object.fromEntries([...this.jobs.values()].map((j) => [j.jobId, j.members().length]));
  }

  /**
   * Mean milliseconds per step of the barrier and the update since the last call, over every
   * job that stepped (weighted by steps), and of the process's decoding of the messages it took
   * and encoding of those it sent (pushes, replies, pulls: the wire clock's time over the same
   * steps); undefined when no job stepped.
   */
  stepPhases(): { barrier: number; update: number; decode: number; encode: number } | undefined {
    let steps = 0;
    let barrier = 0;
    let update = 0;
    for (const job of this.jobs.values()) {
      const t = job.stepTiming();
      if (!t) continue;
      steps += t.steps;
      barrier += t.barrier * t.steps;
      update += t.update * t.steps;
    }
    const wire = wireClock.read();
    const decodeMs = wire.decodeMs - this.wireMark.decodeMs;
    const encodeMs = wire.encodeMs - this.wireMark.encodeMs;
    this.wireMark = wire;
    if (steps === 0) return undefined;
    const perStep = (ms: number) => Math.round((ms / steps) * 100) / 100;
    return { barrier: perStep(barrier), update: perStep(update), decode: perStep(decodeMs), encode: perStep(encodeMs) };
  }

  /** Ends every waiting pull with `ShardClosingError` (shutdown); later waits fail at once. */
  endWaits(): void {
    for (const job of this.jobs.values()) job.close();
  }

  /**
   * Stops the timers, ends waits, checkpoints every job changed since its last save, then gives
   * the jobs' kernel memory back.
   */
  async close(): Promise<void> {
    if (this.closed || this.fenced) return;
    this.closed = true;
    for (const t of this.timers) clearInterval(t);
    this.timers = [];
    const saves: Promise<unknown>[] = [];
    for (const job of this.jobs.values()) {
      job.close();
      const state = this.checkpoints.get(job.jobId);
      if (job.initialized && state && state.savedVersion !== job.version) {
        saves.push(
          this.saveJob(job, this.jobDir(job.jobId)).catch((err: Error) =>
            this.logger.error(`job ${job.jobId}: final checkpoint failed: ${err.message}`),
          ),
        );
      }
    }
    await Promise.all(saves);
    this.recovery.forgetAll();
    await Promise.all([...this.checkpoints.values()].map((s) => s.chain));
    for (const job of this.jobs.values()) job.dispose();
  }

  /** Drops silent members of every job now (the timer calls this too). */
  sweep(): void {
    for (const job of this.jobs.values()) job.sweep(this.memberTtlMs, this.cutGraceMs);
  }

  /**
   * A trainer's step stream was cut (cancelled, or its connection lost). Unless the trainer
   * calls again within the cut grace, it is dropped from the job's quorum then, without waiting
   * out the member TTL.
   */
  streamCut(jobId: string, trainerId: string): void {
    if (this.closed || !this.jobs.get(jobId)?.cut(trainerId)) return;
    const timer = setTimeout(() => {
      if (!this.closed) this.sweep();
    }, this.cutGraceMs + 1);
    timer.unref();
  }

  private async find(jobId: string): Promise<JobShard | undefined> {
    if (!JOB_ID_PATTERN.test(jobId)) {
      throw new InvalidRequestError('job_id', `${JSON.stringify(jobId)} does not match ${JOB_ID_PATTERN}`);
    }
    const known = this.jobs.get(jobId);
    if (known) return known;
    if (this.retired.has(jobId)) return undefined;
    let loading = this.loading.get(jobId);
    if (!loading) {
      loading = this.resume(jobId).finally(() => this.loading.delete(jobId));
      this.loading.set(jobId, loading);
    }
    return loading;
  }

  private async resume(jobId: string): Promise<JobShard | undefined> {
    const point = await this.recovery.resumePoint(jobId);
    if (!point) return undefined;
    const existing = this.jobs.get(jobId);
    if (existing) return existing;
    const progress = this.recovery.progress(jobId);
    const settings = parseJobSettings(point.data.specJson);
    const job = JobShard.fromCheckpoint(point.data, { shard: this.shard, settings, ...this.jobOptions() }, progress);
    this.register(job, point.data.version);
    this.recordProgress(job);
    this.logger.log(describeResume(point, job.version, job.members().length));
    return job;
  }

  private createJob(jobId: string, specJson: string, settings: ReturnType<typeof parseJobSettings>): JobShard {
    // A job initialised again after losing its checkpoints goes on from its recorded version.
    const firstVersion = this.recovery.firstVersion(jobId);
    const job = new JobShard({ jobId, shard: this.shard, specJson, settings, firstVersion, ...this.jobOptions() });
    this.register(job, -1);
    if (firstVersion > 0) {
      this.logger.warn(`job ${jobId}: no checkpoint; once initialised again it goes on from version ${firstVersion}`);
    }
    return job;
  }

  private jobOptions() {
    return {
      initLeaseMs: this.options.initLeaseMs,
      now: this.now,
      kernels: this.options.kernels,
      hooks: {
        onVersion: (job: JobShard, version: number) => this.onVersion(job, version),
        onMembership: (job: JobShard) => this.recordProgress(job),
        onPush: (job: JobShard) => this.options.metrics?.pushed(job.jobId),
        onStepTimed: (job: JobShard, barrierMs: number, updateMs: number) =>
          this.options.metrics?.stepped(job.jobId, barrierMs, updateMs),
        onSnapshot: (job: JobShard, version: number) =>
          this.announce('snapshot', job, version, this.options.onSnapshot),
        onRoundWaiting: (job: JobShard, version: number) =>
          this.announce('waiting round', job, version, this.options.onRoundWaiting),
        onLapse: (job: JobShard, trainerId: string, cut: boolean) =>
          this.logger.warn(
            cut
              ? `job ${job.jobId}: trainer ${trainerId} silent for ${this.cutGraceMs} ms since its step stream was cut; dropped from the quorum`
              : `job ${job.jobId}: trainer ${trainerId} silent for ${this.memberTtlMs} ms; dropped from the quorum`,
          ),
      },
    };
  }

  /**
   * Makes the announcement of `what` for `job` at `version` (a NATS notice, in the service) once
   * the step that raised it has been answered: the step settles the calls that wait on it within
   * the push that completed it, and their answers are written when those calls' continuations
   * run, while the announcement waits for the next turn of the event loop. Made at once, its
   * publish flushed to the NATS socket before the answer was written: on a 2-core machine the
   * push that ends a round of the example took 4.27 ms that way, against 3.95 ms with the
   * announcements a turn later (the trainer's mean push time over 8 alternating windows each). The
   * notices are hints (an evaluator's cue to pull a snapshot, a trainer's to end its round), so
   * a turn later changes nothing else. One that fails (the connection closing at shutdown) is
   * logged.
   */
  private announce(
    what: string,
    job: JobShard,
    version: number,
    make: ((jobId: string, shard: number, version: number) => void) | undefined,
  ): void {
    if (make === undefined) return;
    setImmediate(() => {
      try {
        make(job.jobId, this.shard, version);
      } catch (err) {
        this.logger.warn(
          `job ${job.jobId}: the ${what} of version ${version} was not announced: ${(err as Error).message}`,
        );
      }
    });
  }

  private register(job: JobShard, savedVersion: number): void {
    this.jobs.set(job.jobId, job);
    this.checkpoints.set(job.jobId, { savedVersion, savedAt: this.now(), chain: Promise.resolve() });
    mkdirSync(this.jobDir(job.jobId), { recursive: true });
  }

  private onVersion(job: JobShard, version: number): void {
    this.recordProgress(job);
    const state = this.checkpoints.get(job.jobId);
    if (!state || state.savedVersion < 0) return;
    const every = job.settings.checkpointEverySteps;
    if (every !== undefined && version - state.savedVersion >= every) this.saveInBackground(job);
  }

  /**
   * Rewrites the job's progress record, synchronously, so that it is on disk before the version
   * or member it records is visible to anyone.
   */
  private recordProgress(job: JobShard): void {
    if (this.fenced || !job.initialized || !this.jobs.has(job.jobId)) return;
    this.recovery.record(job.jobId, job.version, job.members());
  }

  private checkpointByTime(): void {
    const now = this.now();
    for (const job of this.jobs.values()) {
      const state = this.checkpoints.get(job.jobId);
      if (!job.initialized || !state || state.savedVersion === job.version) continue;
      if (now - state.savedAt >= job.settings.checkpointEverySeconds * 1000) this.saveInBackground(job);
    }
  }

  private saveInBackground(job: JobShard): void {
    if (this.closed || this.fenced) return;
    this.saveJob(job, this.jobDir(job.jobId)).catch((err: Error) =>
      this.logger.error(`job ${job.jobId}: checkpoint failed: ${err.message}`),
    );
  }

  /**
   * Queues a save behind the job's previous one; the state is captured when its turn comes. A
   * save to the job's own directory is skipped, unless `force`d, when nothing changed since the
   * last one.
   */
  private saveJob(job: JobShard, dir: string, force = false): Promise<CheckpointRecord | undefined> {
    const state = this.checkpoints.get(job.jobId)!;
    const own = dir === this.jobDir(job.jobId);
    // Mark the attempt at once, so the step and time rules do not queue the same save again.
    if (own) state.savedAt = this.now();
    const run = state.chain.then(async () => {
      if (this.fenced) throw new CheckpointError(dir, `shard ${this.shard} is now served by another process`);
      const data = job.capture();
      if (own && !force && data.version === state.savedVersion) return undefined;
      const record = await writeCheckpoint(dir, data, job.settings.checkpointKeep);
      if (own) {
        state.savedVersion = Math.max(state.savedVersion, record.version);
        await syncProgressRecord(dir);
      }
      return record;
    });
    state.chain = run.catch(() => undefined);
    return run;
  }
}
