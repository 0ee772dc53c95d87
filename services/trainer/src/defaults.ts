/** Defaults of the trainer, with their units in their names. */

/** How long the trainer waits for a task before it counts as idle and leaves the quorum. */
export const IDLE_TASK_WAIT_MS = 1_000;

/** How often a progress line is logged while training. */
export const PROGRESS_LOG_INTERVAL_MS = 10_000;

/** How often the member status is refreshed with the training rate while training. */
export const STATUS_UPDATE_INTERVAL_MS = 2_000;

/** Window over which samples per second are measured. */
export const THROUGHPUT_WINDOW_MS = 10_000;

/** How long one parameter pull waits for the version it needs before it is asked again. */
export const PULL_WAIT_MS = 30_000;

/** How long a preempted trainer keeps trying to hand its task back to the master. */
export const HAND_BACK_BUDGET_MS = 10_000;

/** First pause after a parameter server call failed outright; doubles per retry. */
export const PSERVER_RETRY_BACKOFF_MS = 250;

/** Longest pause between retries of a failed parameter server call. */
export const PSERVER_RETRY_MAX_BACKOFF_MS = 4_000;

/** Pause before a job whose set-up failed (learner or parameter servers) is tried again. */
export const JOB_SETUP_RETRY_MS = 5_000;
