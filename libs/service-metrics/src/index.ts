/**
 * `#libs/service-metrics`: each process's Prometheus registry, its readiness checks, and the
 * HTTP server of `/metrics`, `/healthz` and `/readyz`.
 */
export {
  LONG_DURATION_BUCKETS_SECONDS,
  METRIC_PREFIX,
  SHORT_DURATION_BUCKETS_SECONDS,
  FINE_DURATION_BUCKETS_SECONDS,
} from './metric-names.js';
export { metricSamples, sampleValue } from './exposition.js';
export { Readiness } from './readiness.js';
export { ServiceMetrics } from './service-metrics.js';
export { ResolvedHistogram } from './resolved-histogram.js';
export { startMetricsServer } from './metrics-server.js';
export type { MetricSample } from './exposition.js';
export type { MetricDefinition } from './service-metrics.js';
export type { HistogramSeries } from './resolved-histogram.js';
export type { MetricsServer, MetricsServerOptions } from './metrics-server.js';
export type { ReadinessCheck } from './readiness.js';
