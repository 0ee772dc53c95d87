import { status as GrpcStatus } from '@grpc/grpc-js';
import { retryWithBackoff } from '#libs/retry';
import { PserverError, PserverUnavailableError, fromServiceError } from './errors.js';
import { ShardAddressTimeoutError } from './shard-directory.js';

/**
 * How long calls keep retrying a shard that cannot be reached or is shutting down: it may be
 * restarting, or a standby may be taking it over (after the lease TTL when the old owner's
 * machine is gone).
 */
export const UNAVAILABLE_RETRY_MS = 60_000;
/** First pause before a call to an unreachable shard is tried again; doubles per retry. */
export const UNAVAILABLE_BACKOFF_MS = 100;
/** Longest pause between retries of a call to an unreachable shard. */
export const UNAVAILABLE_MAX_BACKOFF_MS = 2_000;

/** How long `retryWhileAway` keeps trying, and what may cut it short. */
export interface UnavailableRetryOptions {
  /** The retry budget in milliseconds, counted from the first try. */
  retryMs: number;
  /** The longest one try waits for the shard's address. */
  addressWaitMs: number;
  /** Stops retrying once aborted (a try in progress is not cut). */
  signal?: AbortSignal;
}

/**
 * Runs `attempt` against `shard`, retrying with backoff while the shard is away (unreachable,
 * unregistered or shutting down) until the budget is spent or the signal aborts; then the last
 * error is thrown as a `PserverError`. Each try is told how long it may wait for an address, so
 * that a try never outlives the budget.
 */
export async function retryWhileAway<T>(
  shard: number,
  attempt: (addressWaitMs: number) => Promise<T>,
  options: UnavailableRetryOptions,
): Promise<T> {
  const deadline = Date.now() + options.retryMs;
  return retryWithBackoff(
    async () => {
      try {
        return await attempt(Math.min(options.addressWaitMs, Math.max(1, deadline - Date.now())));
      } catch (err) {
        throw err instanceof ShardAddressTimeoutError
          ? new PserverUnavailableError(err.message, shard, GrpcStatus.UNAVAILABLE, '', { cause: err })
          : fromServiceError(err, shard);
      }
    },
    {
      initialDelayMs: UNAVAILABLE_BACKOFF_MS,
      maxDelayMs: UNAVAILABLE_MAX_BACKOFF_MS,
      signal: options.signal,
      shouldRetry: (e, pauseMs) =>
        isTransient(e as PserverError) && Date.now() + pauseMs <= deadline && !options.signal?.aborted,
    },
  );
}

/**
 * The shard is away, not refusing: unreachable (no reason from a server), shutting down
 * (`closing`), or its channel was closed under the call because its address changed.
 */
function isTransient(e: PserverError): boolean {
  if (e instanceof PserverUnavailableError) return e.reason === '' || e.reason === 'closing';
  return e.code === GrpcStatus.CANCELLED && e.reason === '';
}
