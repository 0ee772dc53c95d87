import { Kvm, type KV, type KvWatchEntry } from '@nats-io/kv';
import { restartServer } from '../../../test/support/server-restart.js';
import { startTestServers, type TestServers } from '../../../test/support/servers.js';
import { listBucketKeys } from './bucket-keys.js';
import { watchBucket, type BucketWatch } from './bucket-watch.js';
import { connectNats, type NatsConnection } from './nats-connection.js';

/** Collects what a watch delivers, and lets a test wait for a given entry. */
function collect(watch: BucketWatch) {
  const seen: KvWatchEntry[] = [];
  const listeners = new Set<() => void>();
  const done = (async () => {
    for await (const e of watch) {
      seen.push(e);
      for (const l of listeners) l();
    }
  })();
  const waitFor = (pred: (e: KvWatchEntry) => boolean, timeoutMs = 20_000) =>
    new Promise<KvWatchEntry>((resolve, reject) => {
      const timer = setTimeout(() => {
        listeners.delete(check);
        reject(new Error(`no matching entry; saw ${seen.map((e) => `${e.key}@${e.revision}`).join(', ')}`));
      }, timeoutMs);
      const check = () => {
        const hit = seen.find(pred);
        if (hit === undefined) return;
        clearTimeout(timer);
        listeners.delete(check);
        resolve(hit);
      };
      listeners.add(check);
      check();
    });
  return { seen, done, waitFor };
}

const text = (e: KvWatchEntry) => new TextDecoder().decode(e.value);

/**
 * `kv` whose first watch is cut short the way the client library cuts one: `after-first` ends it
 * after its first entry, `fail` stops it with an error after its first entry, `at-once` ends it
 * before any entry. Later watches are the bucket's own; `opened()` counts the watches.
 */
function interruptingFirstWatch(kv: KV, how: 'after-first' | 'fail' | 'at-once') {
  let opened = 0;
  const wrapped: KV = Object.create(kv) as KV;
  wrapped.watch = async (opts) => {
    opened += 1;
    const inner = await kv.watch(opts);
    if (opened > 1) return inner;
    if (how === 'at-once') {
      inner.stop();
      return inner;
    }
    async function* cut() {
      for await (const e of inner) {
        yield e;
        break;
      }
      inner.stop();
      if (how === 'fail') throw new Error('consumer deleted');
    }
    const entries = cut();
    return Object.assign(Object.create(inner) as typeof inner, {
      [Symbol.asyncIterator]: () => entries,
      stop: () => inner.stop(),
    });
  };
  return { kv: wrapped, opened: () => opened };
}

/** A logger that keeps its lines. */
function lineLogger() {
  const lines: string[] = [];
  const keep = (m: string) => void lines.push(m);
  return { lines, logger: { log: keep, warn: keep, error: keep } };
}

describe('bucket watch', () => {
  let servers: TestServers;
  let nc: NatsConnection;
  let kv: KV;

  beforeAll(async () => {
    servers = await startTestServers();
    nc = await connectNats(servers.nats.url, 'bucket-watch test');
    kv = await new Kvm(nc).create('watch-test', { history: 1 });
  });

  afterAll(async () => {
    await nc?.close();
    await servers?.stop();
  });

  test('bucket watch - delivers current values, then changes, and ends on stop', async () => {
    await kv.put('a', 'a1');
    const watch = await watchBucket(kv);
    const { seen, done, waitFor } = collect(watch);
    await waitFor((e) => e.key === 'a');
    await kv.put('b', 'b1');
    await kv.delete('a');
    await waitFor((e) => e.key === 'a' && e.operation === 'DEL');
    watch.stop();
    await done;
    expect(seen.map((e) => `${e.key}:${e.operation}`)).toEqual(['a:PUT', 'b:PUT', 'a:DEL']);
  });

  test('bucket watch - a watch the client library ends is opened again after the last revision, with nothing repeated', async () => {
    // The bucket's own watch is cut short after its first entry, as the client does when it
    // gives up on a consumer.
    const cutting = interruptingFirstWatch(kv, 'after-first');
    await kv.put('c', 'c1');
    const { lines, logger } = lineLogger();
    const watch = await watchBucket(cutting.kv, { key: 'c', logger });
    const { seen, done, waitFor } = collect(watch);
    await waitFor((e) => e.key === 'c' && text(e) === 'c1');
    await kv.put('c', 'c2');
    await waitFor((e) => text(e) === 'c2');
    watch.stop();
    await done;
    expect(cutting.opened()).toBe(2);
    expect(seen.map(text)).toEqual(['c1', 'c2']);
    expect(lines.join('\n')).toContain('ended by itself');
  });

  test('bucket watch - keeps delivering across a NATS server restart', async () => {
    await kv.put('d', 'd1');
    const watch = await watchBucket(kv, { key: 'd' });
    const { seen, done, waitFor } = collect(watch);
    await waitFor((e) => text(e) === 'd1');
    await restartServer(servers, 'nats', { signal: 'SIGKILL', downMs: 500 });
    // Writes retried until the client is connected again.
    for (let i = 0; ; i++) {
      try {
        await kv.put('d', 'd2');
        break;
      } catch (err) {
        if (i > 50) throw err;
        await new Promise((r) => setTimeout(r, 200));
      }
    }
    await waitFor((e) => text(e) === 'd2');
    watch.stop();
    await done;
    expect(seen.map(text)).toEqual(['d1', 'd2']);
  });

  test('bucket watch - a watch that fails (the client stops it with an error) is opened again, not ended', async () => {
    // Without this, a trainer's jobs watch that failed once ended its job loop for good.
    const failing = interruptingFirstWatch(kv, 'fail');
    await kv.put('e', 'e1');
    const { lines, logger } = lineLogger();
    const watch = await watchBucket(failing.kv, { key: 'e', logger });
    const { seen, done, waitFor } = collect(watch);
    await waitFor((e) => text(e) === 'e1');
    await kv.put('e', 'e2');
    await waitFor((e) => text(e) === 'e2');
    watch.stop();
    await done;
    expect(failing.opened()).toBe(2);
    expect(seen.map(text)).toEqual(['e1', 'e2']);
    expect(lines.join('\n')).toContain('failed (consumer deleted)');
  });

  test('bucket watch - an updates-only watch skips current values, also when it is opened again before any change', async () => {
    await kv.put('f', 'f1');
    const ending = interruptingFirstWatch(kv, 'at-once');
    const watch = await watchBucket(ending.kv, { key: 'f', updatesOnly: true });
    const { seen, done, waitFor } = collect(watch);
    for (let i = 0; i < 100 && ending.opened() < 2; i++) await new Promise((r) => setTimeout(r, 50));
    await kv.put('f', 'f2');
    await waitFor((e) => text(e) === 'f2');
    watch.stop();
    await done;
    expect(ending.opened()).toBe(2);
    expect(seen.map(text)).toEqual(['f2']);
  });

  test('bucket keys - listed by request, right after a NATS restart too', async () => {
    const bucket = 'keys-test';
    const keys = await new Kvm(nc).create(bucket, { history: 1 });
    await keys.put('trainer.a', 'x');
    await keys.put('trainer.b', 'y');
    await keys.put('pserver.0', 'z');
    expect((await listBucketKeys(nc, bucket, 'trainer.*')).sort()).toEqual(['trainer.a', 'trainer.b']);
    expect((await listBucketKeys(nc, bucket)).sort()).toEqual(['pserver.0', 'trainer.a', 'trainer.b']);
    await restartServer(servers, 'nats', { signal: 'SIGKILL', downMs: 500 });
    let listed: string[] | undefined;
    for (let i = 0; listed === undefined; i++) {
      // Each attempt answers or fails within the request timeout: it never hangs.
      listed = await listBucketKeys(nc, bucket, 'trainer.*').catch((err: Error) => {
        if (i > 50) throw err;
        return new Promise<undefined>((r) => setTimeout(() => r(undefined), 200));
      });
    }
    expect(listed.sort()).toEqual(['trainer.a', 'trainer.b']);
  });
});
