/**
 * `#libs/retry`: waiting between tries. {@link sleep} pauses without outliving an abort;
 * {@link retryWithBackoff} tries an operation again after doubling, capped pauses.
 */
export { sleep } from './abortable-sleep.js';
export { retryWithBackoff } from './retry-with-backoff.js';

export type { SleepOptions } from './abortable-sleep.js';
export type { BackoffRetryOptions } from './retry-with-backoff.js';
