import type { Counter, Histogram } from 'prom-client';
import { FINE_DURATION_BUCKETS_SECONDS, type ServiceMetrics } from '#libs/service-metrics';

/** What the pserver's metrics read at each scrape: each job's version and quorum size. */
export interface ShardGauges {
  versions(): Record<string, number>;
  memberCounts(): Record<string, number>;
}

/** What a shard reports as it works (see `ParameterShardOptions.metrics`). */
export interface ShardActivity {
  /** A push was taken for `jobId`. */
  pushed(jobId: string): void;
  /** A step was taken for `jobId`: its barrier wait and update, in milliseconds. */
  stepped(jobId: string, barrierMs: number, updateMs: number): void;
}

/**
 * A parameter server's Prometheus metrics, labelled by job and shard: pushes taken, steps, the
 * barrier wait and update time of each step, and (read at each scrape) each job's version and
 * the size of its quorum.
 */
export class PserverMetrics implements ShardActivity {
  private readonly pushes: Counter<'job' | 'shard'>;
  private readonly steps: Counter<'job' | 'shard'>;
  private readonly barrier: Histogram<'job' | 'shard'>;
  private readonly update: Histogram<'job' | 'shard'>;
  private source: ShardGauges | undefined;

  constructor(
    metrics: ServiceMetrics,
    private readonly shard: number,
  ) {
    const labelNames = ['job', 'shard'] as const;
    this.pushes = metrics.counter({
      name: 'tributary_pserver_pushes_total',
      help: 'Pushes of gradients (or deltas) taken.',
      labelNames,
    });
    this.steps = metrics.counter({
      name: 'tributary_pserver_steps_total',
      help: 'Steps (new versions) taken.',
      labelNames,
    });
    this.barrier = metrics.histogram({
      name: 'tributary_pserver_barrier_wait_seconds',
      help: "From a version's first push to its step: the wait for the quorum (0 in async mode).",
      labelNames,
    });
    this.update = metrics.histogram({
      name: 'tributary_pserver_update_seconds',
      help: 'Time of the optimizer update of one step.',
      labelNames,
      buckets: FINE_DURATION_BUCKETS_SECONDS,
    });
    const shardLabel = String(this.shard);
    const versions = () => this.source?.versions() ?? {};
    const members = () => this.source?.memberCounts() ?? {};
    metrics.gauge({
      name: 'tributary_pserver_version',
      help: "Each job's model version on this shard.",
      labelNames,
      collect() {
        this.reset();
        for (const [job, version] of Object.entries(versions())) this.set({ job, shard: shardLabel }, version);
      },
    });
    metrics.gauge({
      name: 'tributary_pserver_members',
      help: "Trainers in each job's quorum on this shard.",
      labelNames,
      collect() {
        this.reset();
        for (const [job, count] of Object.entries(members())) this.set({ job, shard: shardLabel }, count);
      },
    });
  }

  /** Reads the version and member gauges from `source` from now on. */
  follow(source: ShardGauges): void {
    this.source = source;
  }

  pushed(jobId: string): void {
    this.pushes.inc({ job: jobId, shard: this.shard });
  }

  stepped(jobId: string, barrierMs: number, updateMs: number): void {
    const labels = { job: jobId, shard: this.shard };
    this.steps.inc(labels);
    this.barrier.observe(labels, barrierMs / 1_000);
    this.update.observe(labels, updateMs / 1_000);
  }
}
