/** Defaults of the trainer, with their units in their names. */

/** How long the trainer waits for a task before it counts as idle and leaves the quorum. */
export const IDLE_TASK_WAIT_MS = 1_000;

/** How often a progress line is logged while training. */
export const PROGRESS_LOG_INTERVAL_MS = 10_000;

/** How often the member status is refreshed with the training rate while training. */
export const STATUS_UPDATE_INTERVAL_MS = 2_000;

/** Window over which samples per second are measured. */
export const THROUGHPUT_WINDOW_MS = 10_000;

/**
 * How long one parameter pull waits for the version it needs before it is asked again; each
 * time it runs out the shards' versions are checked, so a shard that came back from a restart
 * at an older version is noticed within this.
 */
export const PULL_WAIT_MS = 10_000;

/** How long a preempted trainer keeps trying to hand its task back to the master. */
export const HAND_BACK_BUDGET_MS = 10_000;

/**
 * How long the parameter servers may keep failing calls (restarting, shutting down, loading a
 * checkpoint) before the task in hand is reported failed; counted from the first failure the
 * client hands up, after its own retries.
 */
export const PSERVER_OUTAGE_BUDGET_MS = 30_000;

/**
 * How often a trainer in the sync quorum joins it again while it holds a task: a sign of life
 * well inside the parameter servers' member TTL, which also re-admits it on a shard that
 * restarted and forgot its members.
 */
export const QUORUM_HEARTBEAT_MS = 2_000;

/** Shortest pause between renewals of a task's claim (the master restarts its deadline). */
export const CLAIM_RENEW_MIN_MS = 1_000;

/**
 * How long before the task in hand is expected to end (at the pace of its last minibatch) the
 * next one is claimed and its first chunk read: a claim and a chunk read take a few to a few
 * tens of milliseconds on a busy machine. A task claimed ahead is one more task this trainer
 * holds at an epoch's end, for at most this long.
 */
export const CLAIM_AHEAD_MS = 100;

/**
 * Memory a trainer keeps a job's chunks in, read and checked, for the epochs after the one that
 * read them: 256 MiB, Fashion-MNIST's 60,000 training images five times over (48 MiB decoded).
 */
export const CHUNK_CACHE_BYTES = 256 * 1024 * 1024;

/** Pause before asking again for a task of a job that has `trainers.max` trainers at work. */
export const FULL_JOB_RETRY_MS = 5_000;

/** First pause after a parameter server call failed outright; doubles per retry. */
export const PSERVER_RETRY_BACKOFF_MS = 250;

/** Longest pause between retries of a failed parameter server call. */
export const PSERVER_RETRY_MAX_BACKOFF_MS = 4_000;

/** Pause before a job whose set-up failed (learner or parameter servers) is tried again. */
export const JOB_SETUP_RETRY_MS = 5_000;

/** How long a trainer keeps trying to tell the master that a job cannot be set up. */
export const FAULT_REPORT_BUDGET_MS = 30_000;
