import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readlinkSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { startRedisServer, type ServerProcess } from '#libs/local-cluster';
import { connectRedis, type RedisConnection } from '#libs/messaging';
import type { LineLogger } from '#libs/logging';
import { LeaseWaitAbortedError, ShardLease } from './shard-lease.js';

let dir: string;
let redisServer: ServerProcess;
let redis: RedisConnection;
const connections: RedisConnection[] = [];
const leases: ShardLease[] = [];
let keyCount = 0;
let key: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tributary-lease-'));
  redisServer = await startRedisServer({ dir });
  redis = await connectRedis(redisServer.url, 'lease-test');
});

afterAll(async () => {
  await redis?.close();
  await redisServer?.stop();
  await rm(dir, { recursive: true, force: true });
});

beforeEach(() => {
  key = `test:pserver:shard-${keyCount++}:owner`;
});

afterEach(async () => {
  await Promise.all(leases.splice(0).map((l) => l.release()));
  await Promise.all(connections.splice(0).map((c) => c.close().catch(() => undefined)));
});

interface TestLease {
  lease: ShardLease;
  lines: string[];
  lost: Promise<string>;
}

async function lease(id: string, ttlMs: number, connection: RedisConnection = redis): Promise<TestLease> {
  const lines: string[] = [];
  const logger: LineLogger = {
    log: (m) => lines.push(m),
    warn: (m) => lines.push(m),
    error: (m) => lines.push(m),
  };
  let onLost!: (reason: string) => void;
  const lost = new Promise<string>((r) => (onLost = r));
  const l = new ShardLease(connection, { key, shard: 3, id, ttlMs, pollMs: 50, logger, onLost });
  leases.push(l);
  return { lease: l, lines, lost };
}

async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((r) => setTimeout(r, 10));
}

describe('shard lease', () => {
  it('shard lease - a second process stands by, and takes over once the first one stops renewing', async () => {
    const ownConnection = await connectRedis(redisServer.url, 'lease-test-a');
    connections.push(ownConnection);
    // Leases long enough that a renewal slowed down by a busy machine still lands in time (see
    // the next test): here a must lose the shard only when it is cut off from Redis.
    const a = await lease('pserver-a', 3_000, ownConnection);
    await a.lease.acquire();
    expect(a.lease.held).toBe(true);

    const b = await lease('pserver-b', 3_000);
    let bHolds = false;
    const acquired = b.lease.acquire().then(() => (bHolds = true));
    await until(() => b.lines.some((l) => l.includes('standing by')));
    expect(b.lines.join('\n')).toMatch(/shard 3 is served by pserver-a \(pid \d+ on .*\); standing by/);
    expect(bHolds).toBe(false);
    expect(JSON.parse((await redis.get(key))!)).toMatchObject({ id: 'pserver-a' });

    // a can no longer reach Redis (as if it hung or was cut off): it gives the shard up, and b,
    // once the key lapsed, takes it.
    ownConnection.destroy();
    expect(await a.lost).toMatch(/could not renew the lease for 3000 ms/);
    expect(a.lease.held).toBe(false);
    await acquired;
    expect(b.lease.held).toBe(true);
    expect(JSON.parse((await redis.get(key))!)).toMatchObject({ id: 'pserver-b' });
  });

  it('shard lease - a holder that Redis names someone else loses the shard at its next renewal', async () => {
    // A lease long enough that a renewal slowed down by a busy machine still answers in time: the
    // holder must learn it lost the key to another, not that Redis did not answer.
    const a = await lease('pserver-a', 3_000);
    await a.lease.acquire();
    await redis.set(key, JSON.stringify({ id: 'pserver-z', host: 'elsewhere', pid: 1, since: 'now' }), {
      expiration: { type: 'PX', value: 60_000 },
    });
    expect(await a.lost).toMatch(/the lease is now held by pserver-z \(pid 1 on elsewhere/);
    expect(a.lease.held).toBe(false);
  });

  it('shard lease - releasing lets a standby take over without waiting for the TTL', async () => {
    const a = await lease('pserver-a', 120_000);
    await a.lease.acquire();
    const b = await lease('pserver-b', 120_000);
    const acquired = b.lease.acquire();
    await until(() => b.lines.some((l) => l.includes('standing by')));
    await a.lease.release();
    await acquired;
    expect(b.lease.held).toBe(true);
    // Releasing a lease that is someone else's now deletes nothing.
    await a.lease.release();
    expect(JSON.parse((await redis.get(key))!)).toMatchObject({ id: 'pserver-b' });
  });

  it('shard lease - a dead owner on this machine is replaced at once', async () => {
    const child = spawn(process.execPath, ['-e', '0']);
    await once(child, 'exit');
    let pidNamespace: string | undefined;
    try {
      pidNamespace = readlinkSync('/proc/self/ns/pid');
    } catch {
      return; // no pid namespaces here: the shortcut does not apply
    }
    const dead = { id: 'pserver-dead', host: hostname(), pid: child.pid, pidNamespace, since: 'earlier' };
    await redis.set(key, JSON.stringify(dead), { expiration: { type: 'PX', value: 600_000 } });
    const b = await lease('pserver-b', 600_000);
    await b.lease.acquire();
    expect(b.lease.held).toBe(true);
    expect(b.lines.join('\n')).toMatch(/previous owner pserver-dead \(pid \d+ on .*\) is dead; taking over at once/);
  });

  it('shard lease - an owner alive elsewhere is waited for, and a standby told to stop stops waiting', async () => {
    const other = { id: 'pserver-far', host: `${hostname()}-elsewhere`, pid: 1, since: 'earlier' };
    await redis.set(key, JSON.stringify(other), { expiration: { type: 'PX', value: 600_000 } });
    const b = await lease('pserver-b', 600_000);
    const stop = new AbortController();
    const acquired = b.lease.acquire(stop.signal);
    await until(() => b.lines.some((l) => l.includes('standing by')));
    stop.abort();
    await expect(acquired).rejects.toBeInstanceOf(LeaseWaitAbortedError);
    expect(b.lease.held).toBe(false);
  });
});
