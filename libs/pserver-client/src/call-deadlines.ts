/** Deadline of a unary call to a shard. */
export const CALL_TIMEOUT_MS = 30_000;
/** Extra time a pull's deadline allows beyond its server-side wait. */
export const PULL_DEADLINE_MARGIN_MS = 30_000;
/** How long a pull waits on the shard by default for a version (or for initialisation). */
export const DEFAULT_PULL_WAIT_MS = 60_000;
