import { status as GrpcStatus } from '@grpc/grpc-js';
import { ShardAddressTimeoutError, ShardCallError, type PserverError } from '#libs/pserver-client';
import { PSERVER_OUTAGE_BUDGET_MS, PSERVER_RETRY_BACKOFF_MS, PSERVER_RETRY_MAX_BACKOFF_MS } from './defaults.js';
import { PserverOutageError } from './errors.js';

/** gRPC codes of a shard that is away for a while: down, restarting, shutting down, overloaded. */
const TRANSIENT_CODES: ReadonlySet<GrpcStatus> = new Set([
  GrpcStatus.UNAVAILABLE,
  GrpcStatus.DEADLINE_EXCEEDED,
  GrpcStatus.CANCELLED,
  GrpcStatus.ABORTED,
  GrpcStatus.RESOURCE_EXHAUSTED,
]);

/**
 * Whether one shard's failure may pass by itself: the shard is unreachable or restarting
 * (`UNAVAILABLE`, also `closing` and `not-initialized` while it loads its checkpoint), a call
 * ran out of time, or no address is registered for it yet.
 */
export function isTransientShardError(err: PserverError): boolean {
  return TRANSIENT_CODES.has(err.code) || err.cause instanceof ShardAddressTimeoutError;
}

/** Whether a sharded call failed only for reasons that may pass by themselves. */
export function isTransientPserverFailure(err: unknown): err is ShardCallError {
  return err instanceof ShardCallError && err.errors.every((e) => e === undefined || isTransientShardError(e));
}

/** The shards a sharded call failed on. */
export function failedShards(err: ShardCallError): Set<number> {
  const failed = new Set<number>();
  err.errors.forEach((e, k) => {
    if (e !== undefined) failed.add(k);
  });
  return failed;
}

/** Settings of a `PserverOutage`. */
export interface PserverOutageOptions {
  /** How long an outage may last before it is given up. */
  budgetMs?: number;
  /** First pause between tries; doubles up to `maxBackoffMs`. */
  initialBackoffMs?: number;
  maxBackoffMs?: number;
  /** Clock, in milliseconds. */
  now?: () => number;
}

/**
 * Tracks one outage of the parameter servers: from the first failed call to the next call that
 * goes through. Hands out doubling pauses between tries and gives up once the outage has lasted
 * longer than its budget.
 */
export class PserverOutage {
  private since: number | undefined;
  private backoffMs: number;
  private readonly budgetMs: number;
  private readonly initialBackoffMs: number;
  private readonly maxBackoffMs: number;
  private readonly now: () => number;

  constructor(options: PserverOutageOptions = {}) {
    this.budgetMs = options.budgetMs ?? PSERVER_OUTAGE_BUDGET_MS;
    this.initialBackoffMs = options.initialBackoffMs ?? PSERVER_RETRY_BACKOFF_MS;
    this.maxBackoffMs = options.maxBackoffMs ?? PSERVER_RETRY_MAX_BACKOFF_MS;
    this.backoffMs = this.initialBackoffMs;
    this.now = options.now ?? Date.now;
  }

  /** Whether an outage is under way (a call failed and none went through since). */
  get active(): boolean {
    return this.since !== undefined;
  }

  /**
   * Notes a failed call; returns the pause before the next try (never past the budget).
   * @throws PserverOutageError once the outage has lasted the whole budget.
   */
  failed(err: Error): number {
    const now = this.now();
    this.since ??= now;
    const elapsed = now - this.since;
    if (elapsed >= this.budgetMs) throw new PserverOutageError(elapsed, this.budgetMs, { cause: err });
    const pause = Math.min(this.backoffMs, this.budgetMs - elapsed);
    this.backoffMs = Math.min(this.maxBackoffMs, this.backoffMs * 2);
    return pause;
  }

  /** Notes a call that went through; true when it ended an outage. */
  recovered(): boolean {
    const ended = this.since !== undefined;
    this.since = undefined;
    this.backoffMs = this.initialBackoffMs;
    return ended;
  }
}
