/** Every metric of Tributary's own starts with this. */
export const METRIC_PREFIX = 'tributary_';

/**
 * Histogram buckets for short durations in seconds (a step's phases, a push or pull, an
 * update): from a millisecond to a minute.
 */
export const SHORT_DURATION_BUCKETS_SECONDS = [
  0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
];

/**
 * Histogram buckets for durations that are often under a millisecond (the phases of a training
 * step, a parameter server's update), in seconds: from 10 µs to 10 s. A step of a small model
 * takes about a millisecond, most of its phases a tenth of that, all of which the short-duration
 * buckets would count under their first bound.
 */
export const FINE_DURATION_BUCKETS_SECONDS = [
  0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5,
  10,
];

/** Histogram buckets for long durations in seconds (a task, an evaluation): up to an hour. */
export const LONG_DURATION_BUCKETS_SECONDS = [0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600];
