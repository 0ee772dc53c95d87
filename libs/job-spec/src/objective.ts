import type { EvaluationMetric, JobSpec, RecordLayout } from './job-spec.js';

/** Whether a metric improves upward (`max`) or downward (`min`). */
export type MetricDirection = 'max' | 'min';

/**
 * True for a classification job (the layout has `numClasses`): sparse categorical cross-entropy
 * and accuracy. False for regression: mean squared error.
 */
export function isClassification(spec: Pick<JobSpec, 'dataset'>): boolean {
  return spec.dataset.layout.numClasses !== undefined;
}

/** `max` for accuracy, `min` for loss. */
export function metricDirection(metric: EvaluationMetric): MetricDirection {
  return metric === 'accuracy' ? 'max' : 'min';
}

/** The metric used when a spec names none: accuracy for classification, loss for regression. */
export function defaultMetric(layout: Pick<RecordLayout, 'numClasses'>): EvaluationMetric {
  return layout.numClasses !== undefined ? 'accuracy' : 'loss';
}

/** True when `value` is at least as good as `target` for a metric going in `direction`. */
export function reachesTarget(value: number, target: number, direction: MetricDirection): boolean {
  return direction === 'max' ? value >= target : value <= target;
}
