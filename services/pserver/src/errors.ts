/**
 * Why a shard refuses a request. Each error carries a `reason` tag that the gRPC server sends
 * in trailing metadata and maps to a status code; a refused request changes nothing.
 */

/** Machine-readable reasons, one per error class. */
export type ShardErrorReason =
  | 'stale-gradient'
  | 'invalid-tensor'
  | 'invalid-request'
  | 'unknown-job'
  | 'not-initialized'
  | 'init-lease'
  | 'already-initialized'
  | 'incomplete-init'
  | 'snapshot-not-retained'
  | 'wait-timeout'
  | 'closing'
  | 'checkpoint';

/** Base of every refusal by a shard. */
export abstract class ShardError extends Error {
  abstract readonly reason: ShardErrorReason;
}

/** Gradients computed from a version the shard no longer (or not yet) accepts. */
export class GradientVersionError extends ShardError {
  override readonly name = 'GradientVersionError';
  readonly reason = 'stale-gradient';

  constructor(
    readonly jobId: string,
    readonly pushedVersion: number,
    readonly shardVersion: number,
  ) {
    super(
      pushedVersion < shardVersion
        ? `stale gradient: version ${pushedVersion} is older than shard version ${shardVersion}`
        : `gradient version ${pushedVersion} is ahead of shard version ${shardVersion}`,
    );
  }
}

/** A tensor with a wrong name, dtype, shape or value, or one missing from a push or init. */
export class InvalidTensorError extends ShardError {
  override readonly name = 'InvalidTensorError';
  readonly reason = 'invalid-tensor';

  constructor(
    /** The parameter concerned (empty when the problem is not one parameter's). */
    readonly param: string,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** A request field is missing or out of range (job id, samples, spec, shard count). */
export class InvalidRequestError extends ShardError {
  override readonly name = 'InvalidRequestError';
  readonly reason = 'invalid-request';

  constructor(
    readonly field: string,
    detail: string,
    options?: ErrorOptions,
  ) {
    super(`${field}: ${detail}`, options);
  }
}

/** The shard has never heard of the job and has no checkpoint of it. */
export class JobUnknownToShardError extends ShardError {
  override readonly name = 'JobUnknownToShardError';
  readonly reason = 'unknown-job';

  constructor(
    readonly jobId: string,
    readonly shard: number,
  ) {
    super(`job ${jobId} is unknown to shard ${shard}; call BeginInit first`);
  }
}

/** The job's parameters have not been initialised on this shard yet. */
export class NotInitializedError extends ShardError {
  override readonly name = 'NotInitializedError';
  readonly reason = 'not-initialized';

  constructor(
    readonly jobId: string,
    readonly shard: number,
  ) {
    super(`job ${jobId} is not initialised on shard ${shard} yet`);
  }
}

/** Another trainer holds the init lease. */
export class InitLeaseHeldError extends ShardError {
  override readonly name = 'InitLeaseHeldError';
  readonly reason = 'init-lease';

  constructor(
    readonly jobId: string,
    readonly holder: string,
    readonly trainerId: string,
  ) {
    super(`job ${jobId}: trainer ${trainerId} does not hold the init lease (held by ${holder || 'nobody'})`);
  }
}

/** Init data arrived for a shard that is already initialised. */
export class AlreadyInitializedError extends ShardError {
  override readonly name = 'AlreadyInitializedError';
  readonly reason = 'already-initialized';

  constructor(
    readonly jobId: string,
    readonly version: number,
  ) {
    super(`job ${jobId} is already initialised (version ${version})`);
  }
}

/** FinishInit before every owned parameter arrived. */
export class IncompleteInitError extends ShardError {
  override readonly name = 'IncompleteInitError';
  readonly reason = 'incomplete-init';

  constructor(
    readonly jobId: string,
    readonly missing: readonly string[],
  ) {
    super(`job ${jobId}: cannot finish init, missing parameters: ${missing.join(', ')}`);
  }
}

/** A pull asked for a snapshot version the shard does not keep. */
export class SnapshotNotRetainedError extends ShardError {
  override readonly name = 'SnapshotNotRetainedError';
  readonly reason = 'snapshot-not-retained';

  constructor(
    readonly jobId: string,
    readonly version: number,
    readonly retained: readonly number[],
  ) {
    super(`job ${jobId}: snapshot of version ${version} is not retained (retained: ${retained.join(', ') || 'none'})`);
  }
}

/** A pull's wait for a version (or for initialisation) ran out. */
export class WaitTimeoutError extends ShardError {
  override readonly name = 'WaitTimeoutError';
  readonly reason = 'wait-timeout';

  constructor(
    readonly jobId: string,
    readonly minVersion: number,
    readonly version: number,
    readonly waitMs: number,
  ) {
    super(`job ${jobId}: version ${minVersion} not reached within ${waitMs} ms (shard is at ${version})`);
  }
}

/** The shard is shutting down; calls waiting on it end with this. */
export class ShardClosingError extends ShardError {
  override readonly name = 'ShardClosingError';
  readonly reason = 'closing';

  constructor(readonly shard: number) {
    super(`shard ${shard} is shutting down`);
  }
}

/** A checkpoint could not be written, or none of a job's checkpoints could be read. */
export class CheckpointError extends ShardError {
  override readonly name = 'CheckpointError';
  readonly reason = 'checkpoint';

  constructor(
    /** The checkpoint file or directory. */
    readonly path: string,
    detail: string,
    options?: ErrorOptions,
  ) {
    super(`checkpoint ${path}: ${detail}`, options);
  }
}
