import { ServiceMetrics } from '#libs/service-metrics';
import { PserverMetrics } from './pserver-metrics.js';

describe('pserver metrics', () => {
  test('pserver metrics - versions and members are read at each scrape; pushes and steps count by job and shard', async () => {
    const metrics = new ServiceMetrics({ processMetrics: false });
    const shard = new PserverMetrics(metrics, 3);
    let versions: Record<string, number> = { a: 4, b: 9 };
    shard.follow({ versions: () => versions, memberCounts: () => ({ a: 2 }) });
    shard.pushed('a');
    shard.pushed('a');
    shard.stepped('a', 20, 5);
    let text = await metrics.render();
    expect(text).toContain('tributary_pserver_version{job="a",shard="3"} 4');
    expect(text).toContain('tributary_pserver_version{job="b",shard="3"} 9');
    expect(text).toContain('tributary_pserver_members{job="a",shard="3"} 2');
    expect(text).toContain('tributary_pserver_pushes_total{job="a",shard="3"} 2');
    expect(text).toContain('tributary_pserver_steps_total{job="a",shard="3"} 1');
    expect(text).toContain('tributary_pserver_barrier_wait_seconds_sum{job="a",shard="3"} 0.02');
    expect(text).toContain('tributary_pserver_update_seconds_sum{job="a",shard="3"} 0.005');
    // A job the shard dropped leaves the gauges.
    versions = { a: 5 };
    text = await metrics.render();
    expect(text).toContain('tributary_pserver_version{job="a",shard="3"} 5');
    expect(text).not.toContain('job="b"');
  });

  test('pserver metrics - an update under a millisecond lands in a bucket of its own size', async () => {
    const metrics = new ServiceMetrics({ processMetrics: false });
    const shard = new PserverMetrics(metrics, 0);
    shard.stepped('a', 0, 0.04);
    const text = await metrics.render();
    expect(text).toContain('tributary_pserver_update_seconds_bucket{le="0.000025",job="a",shard="0"} 0');
    expect(text).toContain('tributary_pserver_update_seconds_bucket{le="0.00005",job="a",shard="0"} 1');
  });
});
