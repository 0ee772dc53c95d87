import { DeliverPolicy, jetstream, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import { startTestServers, type TestServers } from '../../../test/support/servers.js';
import { JobEventPublisher } from './event-publisher.js';
import type { JobEvent } from './events.js';
import { connectNats, type NatsConnection } from './nats-connection.js';
import { ensureStreams } from './streams.js';
import { STREAMS, SUBJECTS } from './subjects.js';

/** A logger that keeps its lines by level. */
function lines() {
  const seen = { log: [] as string[], warn: [] as string[], error: [] as string[] };
  return {
    seen,
    logger: {
      log: (m: string) => seen.log.push(m),
      warn: (m: string) => seen.warn.push(m),
      error: (m: string) => seen.error.push(m),
    },
  };
}

const FAST = { retryMinMs: 20, retryMaxMs: 100, ackTimeoutMs: 1_000 };

describe('job event publisher', () => {
  let servers: TestServers;
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  let js: JetStreamClient;

  beforeAll(async () => {
    servers = await startTestServers();
    nc = await connectNats(servers.nats.url, 'event publisher test');
    jsm = await ensureStreams(nc);
    js = jetstream(nc);
  });

  afterAll(async () => {
    await nc?.close();
    await servers?.stop();
  });

  /** Every event the stream holds for `jobId`, in stream order. */
  async function stored(jobId: string): Promise<JobEvent[]> {
    const { state } = await jsm.streams.info(STREAMS.events.name, { subjects_filter: SUBJECTS.events(jobId) });
    const count = state.subjects?.[SUBJECTS.events(jobId)] ?? 0;
    if (count === 0) return [];
    const consumer = await js.consumers.get(STREAMS.events.name, {
      filter_subjects: SUBJECTS.events(jobId),
      deliver_policy: DeliverPolicy.All,
    });
    const events: JobEvent[] = [];
    while (events.length < count) {
      const m = await consumer.next({ expires: 2_000 });
      if (m === null) break;
      events.push(m.json<JobEvent>());
    }
    await consumer.delete();
    return events;
  }

  it('job event publisher - stores each event once, in order, stamped with the time', async () => {
    const publisher = new JobEventPublisher(js, lines().logger, FAST);
    const before = Date.now();
    publisher.publish({ type: 'submitted', jobId: 'ev-order' });
    for (let epoch = 1; epoch <= 20; epoch += 1) {
      publisher.publish({ type: 'epoch', jobId: 'ev-order', epoch, done: 4, discarded: 0, doneCounts: {} });
    }
    publisher.publish({ type: 'stopped', jobId: 'ev-order', reason: 'maxEpochs' });
    expect(await publisher.flush(10_000)).toBe(0);
    const events = await stored('ev-order');
    expect(events.map((e) => (e.type === 'epoch' ? e.epoch : e.type))).toEqual([
      'submitted',
      ...Array.from({ length: 20 }, (_, i) => i + 1),
      'stopped',
    ]);
    for (const e of events) expect(Date.parse(e.at)).toBeGreaterThanOrEqual(before - 1);
    publisher.close();
  });

  it('job event publisher - keeps what is published while the events stream is away, and stores it once the stream is back', async () => {
    // A stream without a leader answers no publish; one that does not exist behaves the same
    // for a publisher. A core publish is lost then without a word; these must not be.
    await jsm.streams.delete(STREAMS.events.name);
    const { seen, logger } = lines();
    const publisher = new JobEventPublisher(js, logger, FAST);
    try {
      publisher.publish({ type: 'epoch', jobId: 'ev-away', epoch: 1, done: 4, discarded: 0, doneCounts: {} });
      publisher.publish({ type: 'stopped', jobId: 'ev-away', reason: 'maxEpochs' });
      nc.publish(SUBJECTS.events('ev-away'), new TextEncoder().encode('{"type":"lost"}'));
      expect(await publisher.flush(500)).toBe(2);
      expect(seen.warn.join('\n')).toMatch(/publishing the epoch event of job ev-away failed .*retrying/);
    } finally {
      await ensureStreams(nc);
    }
    expect(await publisher.flush(10_000)).toBe(0);
    expect((await stored('ev-away')).map((e) => e.type)).toEqual(['epoch', 'stopped']);
    expect(seen.log.join('\n')).toMatch(/the epoch event of job ev-away published after \d+ attempts/);
    expect(seen.error).toEqual([]);
    publisher.close();
  });

  it('job event publisher - an event stored whose acknowledgement was lost is not stored again by its retry', async () => {
    let calls = 0;
    const lossy = Object.create(js) as JetStreamClient;
    lossy.publish = async (...args: Parameters<JetStreamClient['publish']>) => {
      const ack = await js.publish(...args);
      calls += 1;
      if (calls === 1) throw new Error('timeout');
      return ack;
    };
    const publisher = new JobEventPublisher(lossy, lines().logger, FAST);
    publisher.publish({ type: 'stopped', jobId: 'ev-lost-ack', reason: 'target' });
    publisher.publish({ type: 'model-exported', jobId: 'ev-lost-ack', output: '/out', bestValue: 0.9 });
    expect(await publisher.flush(10_000)).toBe(0);
    expect(calls).toBe(3);
    expect((await stored('ev-lost-ack')).map((e) => e.type)).toEqual(['stopped', 'model-exported']);
    publisher.close();
  });

  it('job event publisher - on a closed connection gives up at once, saying what it dropped', async () => {
    const closing = await connectNats(servers.nats.url, 'event publisher closed test');
    const { seen, logger } = lines();
    const publisher = new JobEventPublisher(jetstream(closing), logger, FAST);
    await closing.close();
    publisher.publish({ type: 'stopped', jobId: 'ev-closed', reason: 'manual' });
    publisher.publish({ type: 'model-exported', jobId: 'ev-closed', output: '/out', bestValue: 1 });
    expect(await publisher.flush(5_000)).toBe(0);
    expect(seen.error.join('\n')).toMatch(
      /publishing the stopped event of job ev-closed failed: .*closed.*; giving up/,
    );
    expect(seen.error.join('\n')).toMatch(
      /closed with 2 event\(s\) the events stream never took: the stopped event of job ev-closed, the model-exported event/,
    );
    expect(seen.warn).toEqual([]);
  });

  it('job event publisher - holds a bounded queue while the stream is away, dropping the oldest waiting, and says what close drops', async () => {
    await jsm.streams.delete(STREAMS.events.name);
    const { seen, logger } = lines();
    const publisher = new JobEventPublisher(js, logger, { ...FAST, queueLimit: 3 });
    try {
      for (let epoch = 1; epoch <= 5; epoch += 1) {
        publisher.publish({ type: 'epoch', jobId: 'ev-full', epoch, done: 1, discarded: 0, doneCounts: {} });
      }
      expect(publisher.pending()).toBe(3);
      expect(seen.error).toHaveLength(2);
      expect(seen.error[0]).toMatch(/the epoch event of job ev-full dropped: 3 events wait/);
      // The one being sent stays first; the newest are kept.
      const dropped = publisher.close();
      expect(dropped.map((e) => (e.type === 'epoch' ? e.epoch : 0))).toEqual([1, 4, 5]);
      expect(seen.error[2]).toMatch(/closed with 3 event\(s\) the events stream never took/);
      publisher.publish({ type: 'stopped', jobId: 'ev-full', reason: 'manual' });
      expect(seen.error[3]).toMatch(/the stopped event of job ev-full not published: the publisher is closed/);
      expect(publisher.pending()).toBe(0);
    } finally {
      await ensureStreams(nc);
    }
    // Nothing sent after the close, even once the stream is back.
    await new Promise((r) => setTimeout(r, 300));
    expect(await stored('ev-full')).toEqual([]);
  });
});
