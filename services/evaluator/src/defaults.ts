/** Defaults of the evaluator, with their units in their names. */

/**
 * Niceness of the evaluator process. Scoring a 10,000-example eval set of the example MLP took
 * 0.1 to 1 s of CPU on WASM on 2-core machines; at the default niceness a trainer sharing its
 * core loses that time on every evaluation, at 10 it keeps most of it (Linux gives a nice-10
 * thread about a tenth of the weight of a nice-0 one).
 */
export const EVALUATOR_NICENESS = 10;
/** How long the status request for a summary waits for the master. */
export const STATUS_TIMEOUT_MS = 2_000;
/**
 * A job found stopped but not exported when the evaluator starts is exported only if it
 * stopped less than this long ago (its parameter servers still hold its parameters).
 */
export const EXPORT_AFTER_RESTART_MAX_AGE_MS = 24 * 3600_000;

/** Notices fetched from the snapshots stream per pull request. */
export const SNAPSHOT_FETCH_MAX_MESSAGES = 256;
/** How long one pull request for notices waits when there are none. */
export const SNAPSHOT_FETCH_EXPIRES_MS = 1_000;
/** How long the last pull before an export waits for notices still in flight (JetStream's minimum). */
export const FINAL_FETCH_EXPIRES_MS = 1_000;
/** Before redelivering a notice left unacknowledged (its version is not complete yet). */
export const SNAPSHOT_ACK_WAIT_MS = 5 * 60_000;
/** The evaluator's consumer of a job is removed by the server after this long unused. */
export const SNAPSHOT_CONSUMER_INACTIVE_MS = 24 * 3600_000;
/**
 * Notices are read from this long before the job's `startedAt`, so a clock behind the
 * server's does not lose the first ones.
 */
export const SNAPSHOT_START_MARGIN_MS = 10_000;
/** Pause after a failed pull or consumer lookup before trying again. */
export const SNAPSHOT_RETRY_DELAY_MS = 1_000;
/** How long a pull waits for a shard with no registered address. */
export const PSERVER_ADDRESS_WAIT_MS = 5_000;
/** How long a shard may take to answer a pull of a snapshot or of the current parameters. */
export const PSERVER_PULL_WAIT_MS = 10_000;
/**
 * A run's history begins with events from this long before its `startedAt`: the `submitted`
 * event comes before the master has indexed the data set.
 */
export const HISTORY_START_MARGIN_MS = 60_000;
/** How long the end of a run waits for its last events to reach the history files. */
export const HISTORY_DRAIN_TIMEOUT_MS = 10_000;

/** How long the evaluator keeps trying to tell the master that it cannot score a job. */
export const FAULT_REPORT_BUDGET_MS = 30_000;
