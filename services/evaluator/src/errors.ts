/** Errors of the evaluator. Each names the job and what could not be done. */
import { PserverError, ShardCallError } from '#libs/pserver-client';

/** The evaluation files of a job could not be read or decoded. */
export class EvaluationSetError extends Error {
  override readonly name = 'EvaluationSetError';

  constructor(
    readonly jobId: string,
    reason: string,
    options?: ErrorOptions,
  ) {
    super(`job ${jobId}: evaluation set: ${reason}`, options);
  }
}

/** The reason a shard gives for a snapshot version it no longer keeps. */
const NOT_RETAINED_REASON = 'snapshot-not-retained';

/**
 * Whether `err` (or what it was caused by, or a shard's error within it) says a shard no longer
 * keeps the snapshot: training went past it before it could be fetched.
 */
export function isSnapshotPassed(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) {
    if (e instanceof PserverError && e.reason === NOT_RETAINED_REASON) return true;
    if (e instanceof ShardCallError && e.errors.some((s) => s?.reason === NOT_RETAINED_REASON)) return true;
  }
  return false;
}

/** The parameters of a snapshot (or the current ones) could not be fetched. */
export class SnapshotParamsError extends Error {
  override readonly name = 'SnapshotParamsError';

  constructor(
    readonly jobId: string,
    readonly version: number | 'current',
    reason: string,
    options?: ErrorOptions,
  ) {
    super(
      `job ${jobId}: parameters of ${version === 'current' ? 'the current version' : `snapshot ${version}`}: ${reason}`,
      options,
    );
  }
}

/** The final model or summary could not be written to the job's output directory. */
export class ModelExportError extends Error {
  override readonly name = 'ModelExportError';

  constructor(
    readonly jobId: string,
    readonly output: string,
    reason: string,
    options?: ErrorOptions,
  ) {
    super(`job ${jobId}: export to ${output}: ${reason}`, options);
  }
}

/** The message of `err` when it is an Error, else its string form: for log lines and events. */
export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
