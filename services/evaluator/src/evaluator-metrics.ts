import type { Counter, Gauge, Histogram } from 'prom-client';
import { LONG_DURATION_BUCKETS_SECONDS, type ServiceMetrics } from '#libs/service-metrics';

/** One evaluation, as the metrics record it. */
export interface EvaluationObservation {
  /** The job's evaluation metric (`evaluation.metric`: accuracy or loss) and its value. */
  metric: string;
  value: number;
  loss: number;
  /** The best value of the metric so far. */
  best: number;
  /** The model version evaluated. */
  version: number;
  seconds: number;
}

/**
 * The evaluator's Prometheus metrics, labelled by job: the last evaluation's metric, best
 * metric, loss and version, the evaluations done, and how long each took.
 */
export class EvaluatorMetrics {
  private readonly metric: Gauge<'job' | 'metric'>;
  private readonly best: Gauge<'job' | 'metric'>;
  private readonly loss: Gauge<'job'>;
  private readonly version: Gauge<'job'>;
  private readonly evaluations: Counter<'job'>;
  private readonly seconds: Histogram<'job'>;

  constructor(metrics: ServiceMetrics) {
    this.metric = metrics.gauge({
      name: 'tributary_evaluator_metric',
      help: "The job's evaluation metric (label metric: accuracy or loss) at the last evaluation.",
      labelNames: ['job', 'metric'],
    });
    this.best = metrics.gauge({
      name: 'tributary_evaluator_best_metric',
      help: "The best value of the job's evaluation metric so far.",
      labelNames: ['job', 'metric'],
    });
    this.loss = metrics.gauge({
      name: 'tributary_evaluator_loss',
      help: 'Loss on the evaluation set at the last evaluation.',
      labelNames: ['job'],
    });
    this.version = metrics.gauge({
      name: 'tributary_evaluator_version',
      help: 'Model version of the last evaluation.',
      labelNames: ['job'],
    });
    this.evaluations = metrics.counter({
      name: 'tributary_evaluator_evaluations_total',
      help: 'Evaluations done.',
      labelNames: ['job'],
    });
    this.seconds = metrics.histogram({
      name: 'tributary_evaluator_evaluation_seconds',
      help: 'Time to score one snapshot on the evaluation set.',
      labelNames: ['job'],
      buckets: LONG_DURATION_BUCKETS_SECONDS,
    });
  }

  /** Records one evaluation of `jobId`. */
  evaluated(jobId: string, e: EvaluationObservation): void {
    this.metric.set({ job: jobId, metric: e.metric }, e.value);
    if (Number.isFinite(e.best)) this.best.set({ job: jobId, metric: e.metric }, e.best);
    this.loss.set({ job: jobId }, e.loss);
    this.version.set({ job: jobId }, e.version);
    this.evaluations.inc({ job: jobId });
    this.seconds.observe({ job: jobId }, e.seconds);
  }
}
