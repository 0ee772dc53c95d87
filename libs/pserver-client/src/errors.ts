import { status as GrpcStatus, type ServiceError } from '@grpc/grpc-js';
import { ERROR_REASON_METADATA_KEY, MalformedTensorError, SHARD_VERSION_METADATA_KEY } from '#libs/pserver-protocol';

/** A parameter server call failed. `code` is the gRPC status code, `shard` the shard called. */
export class PserverError extends Error {
  override readonly name: string = 'PserverError';

  constructor(
    message: string,
    readonly shard: number,
    readonly code: GrpcStatus,
    /** The server's reason tag (`tributary-error-reason`), empty when it sent none. */
    readonly reason: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/**
 * A push was refused because the gradients were computed from a version other than the shard's
 * current one (in synchronous mode, any older one). Pull the parameters again and recompute.
 */
export class StaleGradientError extends PserverError {
  override readonly name = 'StaleGradientError';

  constructor(
    message: string,
    shard: number,
    /** The version the gradients were computed from. */
    readonly pushedVersion: number,
    /** The shard's version when it refused them. */
    readonly shardVersion: number,
    options?: ErrorOptions,
  ) {
    super(message, shard, GrpcStatus.FAILED_PRECONDITION, 'stale-gradient', options);
  }
}

/** A push or init was refused for a wrong name, shape, dtype, value or a missing tensor. */
export class InvalidGradientError extends PserverError {
  override readonly name = 'InvalidGradientError';
}

/** The shard could not be reached, or it does not have the job's parameters yet. */
export class PserverUnavailableError extends PserverError {
  override readonly name = 'PserverUnavailableError';
}

/** A wait on the shard (for a version, or for initialisation) ran out of time. */
export class PserverTimeoutError extends PserverError {
  override readonly name = 'PserverTimeoutError';
}

/** Some shards of a sharded call failed; `errors[k]` is shard k's error, if any. */
export class ShardCallError extends Error {
  override readonly name = 'ShardCallError';

  constructor(
    readonly operation: string,
    readonly errors: readonly (PserverError | undefined)[],
    options?: ErrorOptions,
  ) {
    const failed = errors.flatMap((e, k) => (e ? [`shard ${k}: ${e.message}`] : []));
    super(`${operation} failed on ${failed.length} shard(s): ${failed.join('; ')}`, options);
  }
}

function isServiceError(err: unknown): err is ServiceError {
  return err instanceof Error && typeof (err as Partial<ServiceError>).code === 'number' && 'metadata' in err;
}

/** Turns a grpc-js error into the matching `PserverError` subclass. */
export function fromServiceError(err: unknown, shard: number, pushedVersion?: number): PserverError {
  if (err instanceof PserverError) return err;
  if (err instanceof MalformedTensorError) {
    return new InvalidGradientError(err.message, shard, GrpcStatus.INVALID_ARGUMENT, 'malformed-tensor', {
      cause: err,
    });
  }
  if (!isServiceError(err)) {
    const message = err instanceof Error ? err.message : String(err);
    return new PserverError(`shard ${shard}: ${message}`, shard, GrpcStatus.UNKNOWN, '', { cause: err });
  }
  const reason = String(err.metadata?.get(ERROR_REASON_METADATA_KEY)[0] ?? '');
  const message = `shard ${shard}: ${err.details || err.message}`;
  const options = { cause: err };
  if (reason === 'stale-gradient') {
    const shardVersion = Number(err.metadata.get(SHARD_VERSION_METADATA_KEY)[0] ?? Number.NaN);
    return new StaleGradientError(message, shard, pushedVersion ?? Number.NaN, shardVersion, options);
  }
  switch (err.code) {
    case GrpcStatus.INVALID_ARGUMENT:
      return new InvalidGradientError(message, shard, err.code, reason, options);
    case GrpcStatus.UNAVAILABLE:
      return new PserverUnavailableError(message, shard, err.code, reason, options);
    case GrpcStatus.DEADLINE_EXCEEDED:
      return new PserverTimeoutError(message, shard, err.code, reason, options);
    default:
      return new PserverError(message, shard, err.code, reason, options);
  }
}
