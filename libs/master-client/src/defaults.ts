/** Defaults of the master client, with their units in their names. */

/** How long `nextTask` waits for a task message by default. */
export const NEXT_TASK_TIMEOUT_MS = 1_000;

/**
 * Shortest pull the JetStream server honours; a shorter `timeoutMs` is rounded up to it for the
 * pull itself (the overall wait still ends at the caller's deadline when possible).
 */
export const MIN_PULL_EXPIRES_MS = 1_000;

/** How long one claim, report, status or stop request waits for the master's reply. */
export const MASTER_REQUEST_TIMEOUT_MS = 5_000;

/** How long a claim keeps being retried while the master does not answer. */
export const CLAIM_RETRY_BUDGET_MS = 15_000;

/** First delay between retries of an unanswered request; it doubles up to the max. */
export const RETRY_INITIAL_BACKOFF_MS = 250;

/** Longest delay between retries of an unanswered request. */
export const RETRY_MAX_BACKOFF_MS = 5_000;
