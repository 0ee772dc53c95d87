import { ServiceMetrics } from './service-metrics.js';
import { startMetricsServer, type MetricsServer } from './metrics-server.js';

describe('metrics server', () => {
  let metrics: ServiceMetrics;
  let server: MetricsServer;
  const base = () => server.url.replace(/\/metrics$/, '');

  beforeEach(async () => {
    metrics = new ServiceMetrics();
    server = await startMetricsServer(metrics, { host: '127.0.0.1', port: 0 });
  });

  afterEach(() => server.close());

  test('metrics server - listens on a free port and sets the scrape URL', () => {
    expect(server.port).toBeGreaterThan(0);
    expect(server.url).toBe(`http://127.0.0.1:${server.port}/metrics`);
    expect(metrics.url).toBe(server.url);
  });

  test('metrics server - /metrics serves the counters, gauges and histograms in exposition format', async () => {
    const steps = metrics.counter({ name: 'tributary_test_steps_total', help: 'Steps.', labelNames: ['job'] });
    steps.inc({ job: 'j1' }, 3);
    metrics.gauge({ name: 'tributary_test_version', help: 'Version.', labelNames: ['job'] }).set({ job: 'j1' }, 7);
    metrics
      .histogram({ name: 'tributary_test_update_seconds', help: 'Update.', labelNames: ['job'] })
      .observe({ job: 'j1' }, 0.02);
    const res = await fetch(server.url);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/plain');
    const text = await res.text();
    expect(text).toContain('# TYPE tributary_test_steps_total counter');
    expect(text).toContain('tributary_test_steps_total{job="j1"} 3');
    expect(text).toContain('tributary_test_version{job="j1"} 7');
    expect(text).toContain('tributary_test_update_seconds_bucket{le="0.025",job="j1"} 1');
    expect(text).toContain('tributary_test_update_seconds_count{job="j1"} 1');
    expect(text).toContain('process_cpu_seconds_total');
  });

  test('metrics server - /healthz is 200 while /readyz is 503 with every failing reason until the checks hold', async () => {
    let connected = false;
    metrics.readiness.set('nats', () => (connected ? undefined : 'not connected'));
    metrics.readiness.set('grpc', () => 'not serving yet');
    expect((await fetch(`${base()}/healthz`)).status).toBe(200);
    const notReady = await fetch(`${base()}/readyz`);
    expect(notReady.status).toBe(503);
    expect(await notReady.text()).toBe('not ready\nnats: not connected\ngrpc: not serving yet\n');
    connected = true;
    metrics.readiness.delete('grpc');
    const ready = await fetch(`${base()}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.text()).toBe('ready\n');
  });

  test('metrics server - an unknown path is 404 and a POST is 405', async () => {
    const missing = await fetch(`${base()}/nope`);
    expect(missing.status).toBe(404);
    expect(await missing.text()).toContain('/nope not found');
    expect((await fetch(server.url, { method: 'POST' })).status).toBe(405);
  });
});

describe('service metrics', () => {
  test('service metrics - asking twice for a metric gives the same one', () => {
    const metrics = new ServiceMetrics({ processMetrics: false });
    const def = { name: 'tributary_test_total', help: 'Test.', labelNames: ['job'] } as const;
    expect(metrics.counter(def)).toBe(metrics.counter(def));
  });

  test('service metrics - a name without the prefix, or reused for another kind, is refused naming it', () => {
    const metrics = new ServiceMetrics({ processMetrics: false });
    expect(() => metrics.counter({ name: 'steps_total', help: 'x', labelNames: [] })).toThrow(
      'metric steps_total: Tributary\'s metric names start with "tributary_"',
    );
    metrics.counter({ name: 'tributary_x_total', help: 'x', labelNames: [] });
    expect(() => metrics.gauge({ name: 'tributary_x_total', help: 'x', labelNames: [] })).toThrow(
      'metric tributary_x_total exists already as another kind',
    );
  });

  test('readiness - a check that throws counts as not ready, with its error', () => {
    const metrics = new ServiceMetrics({ processMetrics: false });
    metrics.readiness.set('redis', () => {
      throw new Error('boom');
    });
    expect(metrics.readiness.reasons()).toEqual(['redis: check failed: boom']);
  });
});
