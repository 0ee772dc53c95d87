import { sleep } from './abortable-sleep.js';

/** How {@link retryWithBackoff} paces and ends its tries. */
export interface BackoffRetryOptions {
  /** First pause between tries; it doubles after each failed try. */
  initialDelayMs: number;
  /** Longest pause between tries. */
  maxDelayMs: number;
  /** Cuts a pause short; the try or `shouldRetry` after it decides what an abort means. */
  signal?: AbortSignal;
  /** Pause once before the first try too (the operation has just failed some other way). */
  pauseFirst?: boolean;
  /**
   * Told of each failed try (numbered from 1) with the pause that would come next: true tries
   * again after that pause, false rethrows the error; throwing gives up with that error instead.
   */
  shouldRetry(error: unknown, delayMs: number, attempt: number): boolean;
}

/**
 * Runs `tryOnce` until it resolves, pausing between tries for `initialDelayMs`, then twice as
 * long each time up to `maxDelayMs`, for as long as `shouldRetry` allows.
 * @throws the error of the last try once `shouldRetry` declines it, or whatever `shouldRetry` throws.
 */
export async function retryWithBackoff<T>(
  tryOnce: (attempt: number) => Promise<T>,
  options: BackoffRetryOptions,
): Promise<T> {
  let delayMs = options.initialDelayMs;
  const nextDelay = () => {
    delayMs = Math.min(options.maxDelayMs, delayMs * 2);
  };
  if (options.pauseFirst) {
    await sleep(delayMs, options.signal);
    nextDelay();
  }
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await tryOnce(attempt);
    } catch (err) {
      if (!options.shouldRetry(err, delayMs, attempt)) throw err;
    }
    await sleep(delayMs, options.signal);
    nextDelay();
  }
}
