/*
 * Where a shard is recovered: how a restarted shard resumes each job, and why its version never
 * goes back.
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

import { createOptimizerState, optimizerStateSlots } from '#libs/optimizer';
import { loadCheckpoint, type CheckpointData } from './checkpoint.js';
import { CheckpointError } from './errors.js';
import type { LineLogger } from '#libs/logging';
import type { ShardJobSettings } from './job-settings.js';
import { ProgressRecordFile, readProgressRecord, type ProgressRecord, type RecordedMember } from './progress-record.js';
import type { ShardParam } from './shard-parameters.js';

/** What a job shard resumes with: the checkpoint's parameters at the version it had reached. */
export interface ResumedShard {
  params: ShardParam[];
  /** The recorded version, never below the checkpoint's. */
  version: number;
  /** The recorded members of the quorum, counted from `version + 1` at the earliest. */
  members: readonly RecordedMember[];
}

/**
 * The state a job shard resumes in from `data` and, when there is one, its progress record.
 * The checkpoint's optimizer state is kept when it belongs to the job's optimizer and holds the
 * slots it keeps under the job's settings; otherwise each parameter starts from fresh state.
 */
export function resumedShard(
  data: CheckpointData,
  settings: Pick<ShardJobSettings, 'kernel' | 'hyper'>,
  progress?: Pick<ProgressRecord, 'version' | 'members'>,
): ResumedShard {
  const { kernel, hyper } = settings;
  const stateMatches = data.optimizer === kernel.name;
  const slots = optimizerStateSlots(kernel, hyper).length;
  return {
    params: data.tensors.map((t) => ({
      name: t.name,
      shape: t.shape,
      value: t.value,
      state: stateMatches && t.state.length === slots ? t.state : createOptimizerState(kernel, t.value.length, hyper),
    })),
    version: Math.max(data.version, progress?.version ?? 0),
    members: progress?.members ?? [],
  };
}

/**
 * The recovery step of a synchronous job after a restart: open at the resumed version until a
 * step is taken. While it is open, the first push for that version takes the step without
 * waiting for the quorum, and a pull wanting a later version takes it even without a push.
 */
export class RecoveryStep {
  private openAt?: number;

  /** Opens the recovery step at `version`. */
  open(version: number): void {
    this.openAt = version;
  }

  /** Closes it; any step taken closes it. */
  close(): void {
    this.openAt = undefined;
  }

  /** True when the contributions pending at `version` step without waiting for the quorum. */
  stepsWithoutQuorum(version: number, pending: number): boolean {
    return this.openAt === version && pending > 0;
  }

  /** True when a pull at `version` wanting `minVersion` takes the step. */
  stepsForPull(version: number, minVersion: number): boolean {
    return this.openAt !== undefined && this.openAt === version && minVersion > version;
  }
}

/** Settings of a `ShardRecovery`. */
export interface ShardRecoveryOptions {
  /** This process's shard index. */
  shard: number;
  /** The checkpoint directory of a job. */
  jobDir: (jobId: string) => string;
  logger: LineLogger;
}

/** A checkpoint a job resumes from, and the file it was read from. */
export interface ResumePoint {
  data: CheckpointData;
  file: string;
}

/**
 * The disk side of recovery for one shard: finds the checkpoint and the progress record a job
 * resumes from, and keeps the progress record current while the job runs.
 */
export class ShardRecovery {
  /** Each running job's progress record, kept open. */
  private readonly records = new Map<string, ProgressRecordFile>();

  constructor(private readonly options: ShardRecoveryOptions) {}

  /**
   * The job's latest intact checkpoint, if any. A checkpoint directory with none usable is
   * logged and answered with undefined, so the job is initialised again by the election; a
   * checkpoint of another job or shard is a `CheckpointError`.
   */
  async resumePoint(jobId: string): Promise<ResumePoint | undefined> {
    const { shard, logger } = this.options;
    let found: ResumePoint | undefined;
    try {
      found = await loadCheckpoint(this.options.jobDir(jobId), (line) => logger.warn(line));
    } catch (err) {
      if (!(err instanceof CheckpointError)) throw err;
      logger.error(`job ${jobId}: ${err.message}; the job will be initialised again by the election`);
      return undefined;
    }
    if (!found) return undefined;
    const { data, file } = found;
    if (data.jobId !== jobId || data.shard !== shard) {
      throw new CheckpointError(
        file,
        `belongs to job ${data.jobId} shard ${data.shard}, not job ${jobId} shard ${shard}`,
      );
    }
    return found;
  }

  /** The job's progress record, if it has a usable one (a damaged one is logged and ignored). */
  progress(jobId: string): ProgressRecord | undefined {
    const { shard, logger } = this.options;
    try {
      const record = readProgressRecord(this.options.jobDir(jobId));
      if (record && (record.jobId !== jobId || record.shard !== shard)) {
        logger.warn(`job ${jobId}: progress record belongs to job ${record.jobId} shard ${record.shard}; ignored`);
        return undefined;
      }
      return record;
    } catch (err) {
      logger.warn(`job ${jobId}: ${(err as Error).message}; resuming at the checkpoint's version`);
      return undefined;
    }
  }

  /**
   * The version a job without a checkpoint starts at once initialised again: the recorded one,
   * so that its version does not go back either; 0 for a new job.
   */
  firstVersion(jobId: string): number {
    return this.progress(jobId)?.version ?? 0;
  }

  /**
   * Rewrites the job's progress record, synchronously, so that it is on disk before the version
   * or member it records is visible to anyone. A failure is logged; the job goes on.
   */
  record(jobId: string, version: number, members: RecordedMember[]): void {
    try {
      let file = this.records.get(jobId);
      if (file === undefined) {
        file = new ProgressRecordFile(this.options.jobDir(jobId));
        this.records.set(jobId, file);
      }
      file.write({ jobId, shard: this.options.shard, version, members });
    } catch (err) {
      this.options.logger.error(`job ${jobId}: progress record not written: ${(err as Error).message}`);
    }
  }

  /** Closes the job's progress record (the job was dropped from memory); it stays on disk. */
  forget(jobId: string): void {
    this.records.get(jobId)?.close();
    this.records.delete(jobId);
  }

  /** Closes every progress record (the shard is closing or lost its lease). */
  forgetAll(): void {
    for (const jobId of [...this.records.keys()]) this.forget(jobId);
  }
}

/** The log line of a resumed job: where from, at which version, and what was lost. */
export function describeResume(point: ResumePoint, version: number, members: number): string {
  const { data, file } = point;
  const lost =
    version > data.version
      ? `; the updates of versions ${data.version + 1}..${version} to this shard's parameters were lost`
      : '';
  return (
    `job ${data.jobId}: resumed at version ${version} from ${file} (checkpoint of version ${data.version})${lost}` +
    (members > 0 ? `; ${members} member(s) of the quorum restored` : '')
  );
}
