import { Kvm, type KV } from '@nats-io/kv';
import { restartServer } from '../../../test/support/server-restart.js';
import { startTestServers, type TestServers } from '../../../test/support/servers.js';
import { LatestValueWriter } from './latest-value-writer.js';
import { connectNats, type NatsConnection } from './nats-connection.js';

describe('latest value writer', () => {
  let servers: TestServers;
  let nc: NatsConnection;
  let kv: KV;

  beforeAll(async () => {
    servers = await startTestServers();
    nc = await connectNats(servers.nats.url, 'writer test');
    kv = await new Kvm(nc).create('writer-test', { history: 1 });
  });

  afterAll(async () => {
    await nc?.close();
    await servers?.stop();
  });

  const read = async (key: string) => {
    const e = await kv.get(key);
    return e === null ? undefined : new TextDecoder().decode(e.value);
  };

  test('latest value writer - the last of several quick writes is the one stored', async () => {
    const writer = new LatestValueWriter(kv);
    const puts = ['1', '2', '3'].map((v) => writer.put('k', new TextEncoder().encode(v)));
    await Promise.all(puts);
    expect(await read('k')).toBe('3');
    expect(writer.pending()).toEqual([]);
    writer.close();
  });

  test('latest value writer - a write that fails while NATS is down lands once it is back', async () => {
    const warnings: string[] = [];
    const writer = new LatestValueWriter(kv, {
      log: () => undefined,
      warn: (m) => warnings.push(m),
      error: (m) => warnings.push(m),
    });
    const stopped = servers.nats.stop();
    await stopped;
    await expect(writer.put('r', new TextEncoder().encode('during'))).rejects.toThrow();
    expect(writer.pending()).toEqual(['r']);
    await restartServer(servers, 'nats', { downMs: 0 });
    for (let i = 0; i < 300 && writer.pending().length > 0; i++) await new Promise((r) => setTimeout(r, 100));
    expect(writer.pending()).toEqual([]);
    expect(await read('r')).toBe('during');
    expect(warnings.join('\n')).toContain('writing r failed');
    writer.close();
  });
});

describe('latest value writer, without a server', () => {
  /** A bucket whose every put fails, counting the attempts. */
  const failingBucket = () => {
    const bucket = {
      attempts: 0,
      put: async () => {
        bucket.attempts += 1;
        throw new Error('no responders');
      },
    };
    return bucket;
  };

  test('latest value writer - close drops what is still being retried and tries it no more', async () => {
    const bucket = failingBucket();
    const writer = new LatestValueWriter(bucket as unknown as KV);
    await expect(writer.put('b', new TextEncoder().encode('x'))).rejects.toThrow('no responders');
    expect(bucket.attempts).toBe(1);
    expect(writer.retriesScheduled()).toBe(1);
    expect(writer.close()).toEqual(['b']);
    expect(writer.pending()).toEqual([]);
    expect(writer.retriesScheduled()).toBe(0);
    await expect(writer.put('c', new TextEncoder().encode('y'))).rejects.toThrow('writer closed');
    expect(bucket.attempts).toBe(1);
  });
});
