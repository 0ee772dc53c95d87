import fc from 'fast-check';
import { Histogram, Registry, type Metric } from 'prom-client';
import { FINE_DURATION_BUCKETS_SECONDS } from './metric-names.js';
import { ResolvedHistogram } from './resolved-histogram.js';
import { ServiceMetrics } from './service-metrics.js';

const DEF = {
  name: 'tributary_test_phase_seconds',
  help: 'A phase.',
  labelNames: ['job', 'phase'] as const,
  buckets: FINE_DURATION_BUCKETS_SECONDS,
};

/** The exposition of prom-client's own histogram and of ours after the same observations. */
async function bothRendered(observations: readonly { job: string; phase: string; value: number }[]) {
  const theirs = new Registry();
  const ours = new Registry();
  const reference = new Histogram({ ...DEF, labelNames: [...DEF.labelNames], registers: [theirs] });
  const resolved = new ResolvedHistogram(DEF);
  ours.registerMetric(resolved as unknown as Metric);
  for (const { job, phase, value } of observations) {
    reference.observe({ job, phase }, value);
    resolved.series({ job, phase }).observe(value);
  }
  return { theirs: await theirs.metrics(), ours: await ours.metrics(), resolved };
}

describe('ResolvedHistogram', () => {
  test('renders what prom-client renders for the same observations, bounds included', async () => {
    const value = fc.oneof(
      fc.constantFrom(0, ...FINE_DURATION_BUCKETS_SECONDS),
      fc.double({ min: 0, max: 20, noNaN: true }),
    );
    const observation = fc.record({
      job: fc.constantFrom('a', 'b "c"'),
      phase: fc.constantFrom('train', 'push'),
      value,
    });
    await fc.assert(
      fc.asyncProperty(fc.array(observation, { minLength: 1, maxLength: 60 }), async (observations) => {
        const { theirs, ours } = await bothRendered(observations);
        expect(ours).toBe(theirs);
      }),
      { numRuns: 50 },
    );
  });

  test('a series looked up once keeps counting, and reset sets it back to zero', async () => {
    const { resolved } = await bothRendered([]);
    const train = resolved.series({ job: 'j', phase: 'train' });
    train.observe(0.0008);
    train.observe(0.0009);
    resolved.series({ job: 'j', phase: 'train' }).observe(0.003);
    const registry = new Registry();
    registry.registerMetric(resolved as unknown as Metric);
    const text = await registry.metrics();
    expect(text).toContain('tributary_test_phase_seconds_bucket{le="0.001",job="j",phase="train"} 2');
    expect(text).toContain('tributary_test_phase_seconds_count{job="j",phase="train"} 3');
    resolved.reset();
    train.observe(0.0001);
    expect(await registry.metrics()).toContain('tributary_test_phase_seconds_count{job="j",phase="train"} 1');
  });

  test('refuses labels other than its own, and a value that is not a finite number', () => {
    const resolved = new ResolvedHistogram(DEF);
    expect(() => resolved.series({ job: 'j' } as never)).toThrow(/must be exactly job, phase/);
    expect(() => resolved.series({ job: 'j', phase: 'p', extra: 'x' } as never)).toThrow(/must be exactly/);
    expect(() => resolved.series({ job: 'j', phase: 'p' }).observe(Number.NaN)).toThrow(/not a finite number/);
  });

  test('ServiceMetrics hands out one per name, on the registry /metrics renders', async () => {
    const metrics = new ServiceMetrics({ processMetrics: false });
    const first = metrics.resolvedHistogram(DEF);
    expect(metrics.resolvedHistogram(DEF)).toBe(first);
    first.series({ job: 'j', phase: 'train' }).observe(0.5);
    expect(await metrics.render()).toContain('tributary_test_phase_seconds_sum{job="j",phase="train"} 0.5');
    expect(() => metrics.histogram(DEF)).toThrow(/exists already as another kind/);
  });
});
