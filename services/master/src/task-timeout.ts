/** Recent task durations averaged into the timeout, by default. */
export const TASK_DURATION_WINDOW = 20;

/**
 * How long a claim holds without being renewed, by default: a live trainer renews every third
 * of it, so a dead one's tasks go back this long after its last renewal (as long as the
 * parameter servers keep a silent trainer in the synchronous quorum), not after a whole task
 * timeout.
 */
export const CLAIM_LEASE_MS = 10_000;

/**
 * When a pending task counts as lost: `max(floorMs, multiplier x mean of the last `window`
 * task durations)`, or `floorMs` before any task finished.
 */
export interface TaskTimeoutPolicy {
  floorMs: number;
  multiplier: number;
  /** How many recent durations the moving average covers. */
  window: number;
}

/** The timeout in milliseconds for the given recent durations (oldest first). */
export function taskTimeoutMs(policy: TaskTimeoutPolicy, recentDurationsMs: readonly number[]): number {
  const recent = recentDurationsMs.slice(-policy.window);
  if (recent.length === 0) return policy.floorMs;
  const mean = recent.reduce((sum, d) => sum + d, 0) / recent.length;
  return Math.max(policy.floorMs, Math.ceil(policy.multiplier * mean));
}

/** Appends a duration, keeping only the last `window` entries. */
export function recordDuration(recentDurationsMs: readonly number[], durationMs: number, window: number): number[] {
  return [...recentDurationsMs, Math.max(0, Math.round(durationMs))].slice(-window);
}
