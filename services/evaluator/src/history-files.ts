/**
 * The history files of a job's output directory: `events.jsonl` (every lifecycle event, as
 * published, with its events-stream sequence `seq`) and `metrics.jsonl` (one line per
 * evaluation). Lines are appended one at a time; a line cut short by a crash is dropped when
 * the files are opened again, and the highest `seq` found says where to go on.
 */
import { appendFile, mkdir, readFile, truncate } from 'node:fs/promises';
import { join } from 'node:path';
import type { JobEvent } from '#libs/messaging';

/** File names in the job's output directory. */
export const EVENTS_FILE = 'events.jsonl';
export const METRICS_FILE = 'metrics.jsonl';

/** One line of `metrics.jsonl`. */
export interface MetricsLine {
  /** Sequence of the `metrics` event in the events stream. */
  seq: number;
  at: string;
  /** Model version evaluated: the parameter servers' optimizer steps when it was taken. */
  version: number;
  step: number;
  epoch: number;
  /** Examples trained on over every trainer by then (absent when the master did not say). */
  samples?: number;
  /** Seconds since the run started. */
  wallSeconds: number;
  /** The job's `evaluation.metric` and its value. */
  metric: 'accuracy' | 'loss';
  value: number | null;
  loss: number;
  accuracy?: number;
  /** Best value of the metric so far. */
  best: number | null;
}

/** The metrics line of a `metrics` event of a run that started at `startedAtMs`. */
export function metricsLine(
  seq: number,
  event: Extract<JobEvent, { type: 'metrics' }>,
  metric: 'accuracy' | 'loss',
  startedAtMs: number,
): MetricsLine {
  const value = event.metrics[metric];
  const line: MetricsLine = {
    seq,
    at: event.at,
    version: event.version,
    step: event.version,
    epoch: event.epoch,
    wallSeconds: Math.max(0, (Date.parse(event.at) - startedAtMs) / 1000) || 0,
    metric,
    value: typeof value === 'number' && Number.isFinite(value) ? value : null,
    loss: event.metrics.loss,
    best: Number.isFinite(event.best) ? event.best : null,
  };
  if (event.samples !== undefined) line.samples = event.samples;
  if (event.metrics.accuracy !== undefined) line.accuracy = event.metrics.accuracy;
  return line;
}

/**
 * The history files of one output directory. `open` first: it repairs a line cut short and
 * says the highest sequence already written; `append` then adds lines for one event.
 */
export class HistoryFiles {
  readonly events: string;
  readonly metrics: string;

  constructor(readonly dir: string) {
    this.events = join(dir, EVENTS_FILE);
    this.metrics = join(dir, METRICS_FILE);
  }

  /** Creates the directory, drops a partial last line of each file, and returns the highest `seq` written (0: none). */
  async open(): Promise<number> {
    await mkdir(this.dir, { recursive: true });
    const [a, b] = await Promise.all([lastSeq(this.events), lastSeq(this.metrics)]);
    return Math.max(a, b);
  }

  /**
   * Appends the lines of one event: its metrics line first, then its events line, so that the
   * events file's last `seq` never runs ahead of the metrics file's.
   */
  async append(seq: number, event: JobEvent, metrics?: MetricsLine): Promise<void> {
    if (metrics !== undefined) await appendFile(this.metrics, `${JSON.stringify(metrics)}\n`);
    await appendFile(this.events, `${JSON.stringify({ seq, ...event })}\n`);
  }
}

/** The highest `seq` in a JSON-lines file, after cutting off a last line with no newline. */
async function lastSeq(file: string): Promise<number> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 0;
    throw err;
  }
  const end = text.lastIndexOf('\n') + 1;
  if (end < text.length) await truncate(file, Buffer.byteLength(text.slice(0, end)));
  let highest = 0;
  for (const line of text.slice(0, end).split('\n')) {
    if (line === '') continue;
    try {
      const seq = (JSON.parse(line) as { seq?: unknown }).seq;
      if (typeof seq === 'number' && seq > highest) highest = seq;
    } catch {
      // A line someone else wrote is kept as it is.
    }
  }
  return highest;
}
