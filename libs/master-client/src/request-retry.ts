import type { NatsConnection } from '#libs/messaging';
import { retryWithBackoff } from '#libs/retry';
import { RETRY_INITIAL_BACKOFF_MS, RETRY_MAX_BACKOFF_MS } from './defaults.js';
import { RequestAbortedError } from './errors.js';

/** How a retried request behaves. */
export interface RetryOptions {
  /** How long each attempt waits for a reply. */
  requestTimeoutMs: number;
  /** Stop retrying when this fires (the last error is the cause). */
  signal?: AbortSignal;
  /** Stop retrying after this many milliseconds in all; forever when absent. */
  budgetMs?: number;
  /** Called after each unanswered attempt, before the backoff delay. */
  onRetry?: (attempt: number, error: Error) => void;
  initialBackoffMs?: number;
  maxBackoffMs?: number;
}

/**
 * Sends a request until a reply comes back: after no responder or a timeout it waits (doubling
 * backoff, capped) and tries again, so a master restart loses nothing. Gives up with
 * `RequestAbortedError` when the signal fires or the budget is spent, and rethrows at once when
 * the connection is closed.
 */
export async function requestUntilReply(
  nc: NatsConnection,
  subject: string,
  payload: Uint8Array,
  options: RetryOptions,
): Promise<Uint8Array> {
  const started = Date.now();
  let attempts = 0;
  let lastError: Error | undefined;
  return retryWithBackoff(
    async () => {
      if (options.signal?.aborted) throw new RequestAbortedError(subject, attempts, 'aborted', { cause: lastError });
      if (nc.isClosed()) throw lastError ?? new Error(`connection closed before a request on ${subject}`);
      attempts += 1;
      try {
        const reply = await nc.request(subject, payload, { timeout: options.requestTimeoutMs });
        return reply.data;
      } catch (err) {
        lastError = err as Error;
        throw err;
      }
    },
    {
      initialDelayMs: options.initialBackoffMs ?? RETRY_INITIAL_BACKOFF_MS,
      maxDelayMs: options.maxBackoffMs ?? RETRY_MAX_BACKOFF_MS,
      signal: options.signal,
      shouldRetry: (err, delayMs) => {
        // Only an unanswered request is tried again: an abort or a closed connection ends it.
        if (err !== lastError || nc.isClosed()) return false;
        options.onRetry?.(attempts, err as Error);
        if (options.budgetMs !== undefined && Date.now() - started + delayMs > options.budgetMs) {
          throw new RequestAbortedError(subject, attempts, 'budget spent', { cause: lastError });
        }
        return true;
      },
    },
  );
}
