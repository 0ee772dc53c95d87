/** Every metric of Tributary's own starts with this. */
export const METRIC_PREFIX = 'tributary_';

/**
 * Histogram buckets for short durations in seconds (a step's phases, a push or pull, an
 * update): from a millisecond to a minute.
 */
export const SHORT_DURATION_BUCKETS_SECONDS = [
  0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
];

/** Histogram buckets for long durations in seconds (a task, an evaluation): up to an hour. */
export const LONG_DURATION_BUCKETS_SECONDS = [0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600];
