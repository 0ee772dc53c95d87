import { metricSamples, sampleValue } from './exposition.js';
import { ServiceMetrics } from './service-metrics.js';

const PAGE = [
  '# HELP tributary_trainer_samples_total Examples trained on.',
  '# TYPE tributary_trainer_samples_total counter',
  'tributary_trainer_samples_total{job="job-a"} 640',
  'tributary_trainer_samples_total{job="job-b"} 1280',
  'tributary_trainer_samples_total_other{job="job-a"} 5',
  'tributary_trainer_phase_seconds_count{job="job-a",phase="train"} 10',
  'tributary_up 1 1733150000000',
  'tributary_label_text{path="a \\"b\\" \\\\ c"} 2.5',
  '',
].join('\n');

describe('metricSamples', () => {
  it('reads each sample of the metric named, with its labels, and no other metric', () => {
    expect(metricSamples(PAGE, 'tributary_trainer_samples_total')).toEqual([
      { labels: { job: 'job-a' }, value: 640 },
      { labels: { job: 'job-b' }, value: 1280 },
    ]);
  });

  it('reads samples without labels, with a timestamp, and with escaped label values', () => {
    expect(metricSamples(PAGE, 'tributary_up')).toEqual([{ labels: {}, value: 1 }]);
    expect(metricSamples(PAGE, 'tributary_label_text')).toEqual([{ labels: { path: 'a "b" \\ c' }, value: 2.5 }]);
  });

  it('finds nothing for a metric the page does not have', () => {
    expect(metricSamples(PAGE, 'tributary_missing')).toEqual([]);
    expect(sampleValue(PAGE, 'tributary_missing')).toBeUndefined();
  });
});

describe('sampleValue', () => {
  it('takes the sample whose labels include those asked for', () => {
    expect(sampleValue(PAGE, 'tributary_trainer_samples_total', { job: 'job-b' })).toBe(1280);
    expect(sampleValue(PAGE, 'tributary_trainer_phase_seconds_count', { phase: 'train' })).toBe(10);
    expect(sampleValue(PAGE, 'tributary_trainer_samples_total', { job: 'job-c' })).toBeUndefined();
  });

  it("reads a registry's own page", async () => {
    const metrics = new ServiceMetrics({ processMetrics: false });
    const counter = metrics.counter({ name: 'tributary_test_things_total', help: 'Things.', labelNames: ['job'] });
    counter.inc({ job: 'job-x' }, 3);
    expect(sampleValue(await metrics.render(), 'tributary_test_things_total', { job: 'job-x' })).toBe(3);
  });
});
