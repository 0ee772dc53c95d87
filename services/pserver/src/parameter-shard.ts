import { join } from 'node:path';
import { JOB_ID_PATTERN } from '#libs/messaging';
import type { TensorInfo } from '#libs/pserver-client';
import { loadCheckpoint, writeCheckpoint, type CheckpointRecord } from './checkpoint.js';
import { CheckpointError, InvalidRequestError, UnknownJobError } from './errors.js';
import { JobShard, type InitElectionResult } from './job-shard.js';
import { parseJobSettings } from './job-settings.js';

/** How long a member may stay silent before it is dropped from the quorum. */
export const MEMBER_TTL_MS = 30_000;
/** How often the time-based checkpoint rule is looked at. */
export const CHECKPOINT_TICK_MS = 1_000;

/** Where log lines go (a Nest `Logger` fits). */
export interface ShardLogger {
  log(message: string): void;
  warn(message: string): void;
  error(message: string): void;
}

/** Settings of a `ParameterShard`. */
export interface ParameterShardOptions {
  /** This process's shard index. */
  shard: number;
  /** Checkpoints go to `<dataDir>/<jobId>/`. */
  dataDir: string;
  /** Silence after which a member lapses. Default `MEMBER_TTL_MS`. */
  memberTtlMs?: number;
  /** How long the elected trainer holds the init lease. */
  initLeaseMs?: number;
  /** Called when a snapshot for the evaluator is retained. */
  onSnapshot?: (jobId: string, shard: number, version: number) => void;
  logger?: ShardLogger;
  now?: () => number;
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

const silent: ShardLogger = { log: () => undefined, warn: () => undefined, error: () => undefined };

/**
 * Every job's slice of the parameters held by this process: creates a job on its first
 * BeginInit, resumes one from its checkpoint directory the first time any call names it, drops
 * silent members, and checkpoints each job by steps, by time, on request and on shutdown.
 */
export class ParameterShard {
  readonly shard: number;
  private readonly jobs = new Map<string, JobShard>();
  private readonly loading = new Map<string, Promise<JobShard | undefined>>();
  private readonly checkpoints = new Map<string, CheckpointState>();
  private readonly memberTtlMs: number;
  private readonly logger: ShardLogger;
  private readonly now: () => number;
  private timers: NodeJS.Timeout[] = [];
  private closed = false;

  constructor(private readonly options: ParameterShardOptions) {
    this.shard = options.shard;
    this.memberTtlMs = options.memberTtlMs ?? MEMBER_TTL_MS;
    this.logger = options.logger ?? silent;
    this.now = options.now ?? Date.now;
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

  /** The job, from memory or from its checkpoint; `UnknownJobError` when neither has it. */
  async job(jobId: string): Promise<JobShard> {
    const job = await this.find(jobId);
    if (!job) throw new UnknownJobError(jobId, this.shard);
    return job;
  }

  /**
   * Checkpoints a job now, to `path` when given (a directory) or to its own directory; resolves
   * with the data file written.
   */
  async save(jobId: string, path?: string): Promise<{ path: string; version: number }> {
    const job = await this.job(jobId);
    const dir = path || this.jobDir(jobId);
    const record = (await this.saveJob(job, dir, true))!;
    return { path: join(dir, record.file), version: record.version };
  }

  /** Each job's version. */
  versions(): Record<string, number> {
    return Object.fromEntries([...this.jobs.values()].map((j) => [j.jobId, j.version]));
  }

  /** Ends every waiting pull with `ShardClosingError` (shutdown); later waits fail at once. */
  endWaits(): void {
    for (const job of this.jobs.values()) job.close();
  }

  /** Stops the timers, ends waits, and checkpoints every job changed since its last save. */
  async close(): Promise<void> {
    if (this.closed) return;
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
    await Promise.all([...this.checkpoints.values()].map((s) => s.chain));
  }

  /** Drops silent members of every job now (the timer calls this too). */
  sweep(): void {
    for (const job of this.jobs.values()) job.sweep(this.memberTtlMs);
  }

  private async find(jobId: string): Promise<JobShard | undefined> {
    if (!JOB_ID_PATTERN.test(jobId)) {
      throw new InvalidRequestError('job_id', `${JSON.stringify(jobId)} does not match ${JOB_ID_PATTERN}`);
    }
    const known = this.jobs.get(jobId);
    if (known) return known;
    let loading = this.loading.get(jobId);
    if (!loading) {
      loading = this.resume(jobId).finally(() => this.loading.delete(jobId));
      this.loading.set(jobId, loading);
    }
    return loading;
  }

  private async resume(jobId: string): Promise<JobShard | undefined> {
    const dir = this.jobDir(jobId);
    const found = await loadCheckpoint(dir, (line) => this.logger.warn(line));
    if (!found) return undefined;
    const { data, file } = found;
    if (data.jobId !== jobId || data.shard !== this.shard) {
      throw new CheckpointError(
        file,
        `belongs to job ${data.jobId} shard ${data.shard}, not job ${jobId} shard ${this.shard}`,
      );
    }
    const existing = this.jobs.get(jobId);
    if (existing) return existing;
    const settings = parseJobSettings(data.specJson);
    const job = JobShard.fromCheckpoint(data, { shard: this.shard, settings, ...this.jobOptions() });
    this.register(job, data.version);
    this.logger.log(`job ${jobId}: resumed at version ${data.version} from ${file}`);
    return job;
  }

  private createJob(jobId: string, specJson: string, settings: ReturnType<typeof parseJobSettings>): JobShard {
    const job = new JobShard({ jobId, shard: this.shard, specJson, settings, ...this.jobOptions() });
    this.register(job, -1);
    return job;
  }

  private jobOptions() {
    return {
      initLeaseMs: this.options.initLeaseMs,
      now: this.now,
      hooks: {
        onVersion: (job: JobShard, version: number) => this.onVersion(job, version),
        onSnapshot: (job: JobShard, version: number) => this.options.onSnapshot?.(job.jobId, this.shard, version),
        onLapse: (job: JobShard, trainerId: string) =>
          this.logger.warn(
            `job ${job.jobId}: trainer ${trainerId} silent for ${this.memberTtlMs} ms; dropped from the quorum`,
          ),
      },
    };
  }

  private register(job: JobShard, savedVersion: number): void {
    this.jobs.set(job.jobId, job);
    this.checkpoints.set(job.jobId, { savedVersion, savedAt: this.now(), chain: Promise.resolve() });
  }

  private onVersion(job: JobShard, version: number): void {
    const state = this.checkpoints.get(job.jobId);
    if (!state) return;
    const every = job.settings.checkpointEverySteps;
    const due = version === 0 || (every !== undefined && version - Math.max(0, state.savedVersion) >= every);
    if (due) this.saveInBackground(job);
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
    if (this.closed) return;
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
      const data = job.capture();
      if (own && !force && data.version === state.savedVersion) return undefined;
      const record = await writeCheckpoint(dir, data, job.settings.checkpointKeep);
      if (own) state.savedVersion = Math.max(state.savedVersion, record.version);
      return record;
    });
    state.chain = run.catch(() => undefined);
    return run;
  }
}
