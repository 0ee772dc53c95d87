import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics, type Metric } from 'prom-client';
import { METRIC_PREFIX, SHORT_DURATION_BUCKETS_SECONDS } from './metric-names.js';
import { Readiness } from './readiness.js';
import { ResolvedHistogram } from './resolved-histogram.js';

/** What describes one metric: its name (with the `tributary_` prefix), help text and labels. */
export interface MetricDefinition<L extends string> {
  name: string;
  help: string;
  labelNames: readonly L[];
}

/**
 * One process's Prometheus registry and readiness: the metrics it exports (plus Node's process
 * metrics) and the checks behind `/readyz`. Metrics are created on first use and shared after,
 * so two components of one process asking for the same metric get the same one.
 */
export class ServiceMetrics {
  /** The registry `/metrics` renders. */
  readonly registry = new Registry();
  /** The checks `/readyz` runs. */
  readonly readiness = new Readiness();
  /** Where `/metrics` is served, once the server listens (`http://host:port/metrics`). */
  url = '';

  constructor(options: { processMetrics?: boolean } = {}) {
    if (options.processMetrics ?? true) collectDefaultMetrics({ register: this.registry });
  }

  /** The counter named `name`, created on first use. */
  counter<L extends string>(def: MetricDefinition<L>): Counter<L> {
    return (
      this.existing(def, Counter) ??
      new Counter({ ...def, labelNames: [...def.labelNames], registers: [this.registry] })
    );
  }

  /** The gauge named `name`, created on first use; `collect` refreshes it at each scrape. */
  gauge<L extends string>(def: MetricDefinition<L> & { collect?: (this: Gauge<L>) => void | Promise<void> }): Gauge<L> {
    return (
      this.existing(def, Gauge) ?? new Gauge({ ...def, labelNames: [...def.labelNames], registers: [this.registry] })
    );
  }

  /** The histogram named `name`, created on first use, with short-duration buckets unless given. */
  histogram<L extends string>(def: MetricDefinition<L> & { buckets?: number[] }): Histogram<L> {
    return (
      this.existing(def, Histogram) ??
      new Histogram({
        ...def,
        labelNames: [...def.labelNames],
        buckets: def.buckets ?? SHORT_DURATION_BUCKETS_SECONDS,
        registers: [this.registry],
      })
    );
  }

  /**
   * The histogram named `name` whose series are looked up once (see {@link ResolvedHistogram}),
   * created on first use: for what is observed on every training step.
   */
  resolvedHistogram<L extends string>(def: MetricDefinition<L> & { buckets?: number[] }): ResolvedHistogram<L> {
    const found = this.existing(def, ResolvedHistogram);
    if (found !== undefined) return found as ResolvedHistogram<L>;
    const made = new ResolvedHistogram({ ...def, buckets: def.buckets ?? SHORT_DURATION_BUCKETS_SECONDS });
    this.registry.registerMetric(made as unknown as Metric);
    return made;
  }

  /** The exposition text of every metric, as `/metrics` serves it. */
  render(): Promise<string> {
    return this.registry.metrics();
  }

  private existing<M>(def: MetricDefinition<string>, kind: abstract new (...args: never[]) => M): M | undefined {
    if (!def.name.startsWith(METRIC_PREFIX)) {
      throw new Error(`metric ${def.name}: Tributary's metric names start with "${METRIC_PREFIX}"`);
    }
    const found = this.registry.getSingleMetric(def.name);
    if (found === undefined) return undefined;
    if (!(found instanceof kind)) throw new Error(`metric ${def.name} exists already as another kind`);
    return found;
  }
}
