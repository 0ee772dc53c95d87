import { appendFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { JetStreamManager } from '@nats-io/jetstream';
import {
  SUBJECTS,
  connectNats,
  encodeJson,
  ensureStreams,
  JobEventPublisher,
  type JobEventInput,
  type NatsConnection,
} from '#libs/messaging';
import type { LineLogger } from '#libs/logging';
import { startTestServers, type TestServers } from '../../../test/support/servers.js';
import { EVENTS_FILE, METRICS_FILE } from './history-files.js';
import { JobHistory } from './job-history.js';

const logger: LineLogger = { log: () => undefined, warn: () => undefined, error: () => undefined };

function lines(file: string): Record<string, unknown>[] {
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

describe('job history', () => {
  let servers: TestServers;
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  let publisher: JobEventPublisher;

  beforeAll(async () => {
    servers = await startTestServers();
    nc = await connectNats(servers.nats.url, 'job history test');
    jsm = await ensureStreams(nc);
    publisher = new JobEventPublisher(jsm.jetstream(), logger);
  });

  afterAll(async () => {
    publisher?.close();
    await nc?.close();
    await servers?.stop();
  });

  const history = (jobId: string, output: string, startedAt: string) =>
    new JobHistory(
      { events: publisher, js: jsm.jetstream(), jsm, logger },
      { jobId, startedAt, output, metric: 'accuracy' },
    );
  const metrics = (jobId: string, version: number, samples?: number): JobEventInput => ({
    type: 'metrics',
    jobId,
    version,
    epoch: 0,
    metrics: { loss: 1 / version, accuracy: version / 10 },
    examples: 20,
    best: version / 10,
    ...(samples === undefined ? {} : { samples }),
  });

  test('job history - a restarted writer goes on after the last line, repairing one cut short, with no line twice', async () => {
    const jobId = 'history-a';
    const output = join(servers.dir, 'out-a');
    const startedAt = new Date().toISOString();
    publisher.publish({ type: 'submitted', jobId });
    publisher.publish({ type: 'started', jobId, epoch: 0, tasksPerEpoch: 4, records: 40 });
    publisher.publish(metrics(jobId, 1, 8));
    // Another job's events are not this one's history.
    publisher.publish({ type: 'submitted', jobId: 'history-other' });

    const first = history(jobId, output, startedAt);
    await first.finish();
    expect(lines(join(output, EVENTS_FILE)).map((l) => l['type'])).toEqual(['submitted', 'started', 'metrics']);

    // The evaluator died in the middle of a line; events went on meanwhile.
    appendFileSync(join(output, EVENTS_FILE), '{"seq":99,"type":"metr');
    publisher.publish(metrics(jobId, 2));
    // Another process's event, stored before this writer starts.
    await jsm
      .jetstream()
      .publish(
        SUBJECTS.events(jobId),
        encodeJson({ type: 'stopped', jobId, at: new Date().toISOString(), reason: 'target' }),
      );
    const second = history(jobId, output, startedAt);
    second.start();
    await second.finish();

    const events = lines(join(output, EVENTS_FILE));
    expect(events.map((l) => l['type'])).toEqual(['submitted', 'started', 'metrics', 'metrics', 'stopped']);
    const seqs = events.map((l) => l['seq'] as number);
    expect([...seqs].sort((a, b) => a - b)).toEqual(seqs);
    expect(new Set(seqs).size).toBe(seqs.length);
    expect(events.every((l) => l['jobId'] === jobId)).toBe(true);

    const rows = lines(join(output, METRICS_FILE));
    expect(rows).toHaveLength(2);
    expect(rows[0]).toMatchObject({
      version: 1,
      step: 1,
      samples: 8,
      metric: 'accuracy',
      value: 0.1,
      loss: 1,
      best: 0.1,
    });
    expect(rows[1]).toMatchObject({ version: 2, step: 2, metric: 'accuracy', value: 0.2, loss: 0.5 });
    expect(rows[1]).not.toHaveProperty('samples');
    expect(rows.map((r) => r['seq'])).toEqual(events.filter((e) => e['type'] === 'metrics').map((e) => e['seq']));
    for (const r of rows) expect(r['wallSeconds']).toBeGreaterThanOrEqual(0);

    // A third writer with nothing new writes nothing.
    await history(jobId, output, startedAt).finish();
    expect(lines(join(output, EVENTS_FILE))).toHaveLength(5);
    expect(lines(join(output, METRICS_FILE))).toHaveLength(2);
  });

  it('job history - closing at any moment of its start-up ends it (a consumer closed before it was read)', async () => {
    // A job that fails as soon as it starts closes its history while the events consumer is
    // being set up; every delay below lands in a different stage of that.
    for (const delayMs of [0, 1, 5, 20, 50]) {
      const h = history(`closing-${delayMs}`, join(servers.dir, `out-closing-${delayMs}`), new Date().toISOString());
      h.start();
      await new Promise((r) => setTimeout(r, delayMs));
      const closed = await Promise.race([
        h.close().then(() => 'closed'),
        new Promise((r) => setTimeout(() => r('still open after 5 s'), 5_000)),
      ]);
      expect(closed).toBe('closed');
    }
  });
});
