/** One sample of a metric in Prometheus's text format: its labels and its value. */
export interface MetricSample {
  labels: Record<string, string>;
  value: number;
}

const SAMPLE_LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

function unescapeLabel(value: string): string {
  return value.replace(/\\(["\\n])/g, (_, c: string) => (c === 'n' ? '\n' : c));
}

/**
 * The samples of metric `name` in a `/metrics` page (Prometheus's text exposition format), in
 * page order; comments and other metrics are skipped. A histogram's series are named as the page
 * names them (`..._bucket`, `..._sum`, `..._count`).
 */
export function metricSamples(text: string, name: string): MetricSample[] {
  const found: MetricSample[] = [];
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const m = SAMPLE_LINE.exec(line.trim());
    if (m === null || m[1] !== name) continue;
    const labels = Object.fromEntries([...(m[2] ?? '').matchAll(LABEL)].map((l) => [l[1]!, unescapeLabel(l[2]!)]));
    found.push({ labels, value: Number(m[3]) });
  }
  return found;
}

/** The value of the first sample of metric `name` that has all of `labels`; undefined when none has. */
export function sampleValue(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  return metricSamples(text, name).find((s) => Object.entries(labels).every(([k, v]) => s.labels[k] === v))?.value;
}
