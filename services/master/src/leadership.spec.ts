import { startRedisServer, type ServerProcess } from '#libs/local-cluster';
import { connectRedis, type RedisConnection } from '#libs/messaging';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LeaderLease, leaseEpoch, leaseKeys } from './leader-lease.js';
import { Leadership, NO_LEASE_TOKEN, type LeaderDuties } from './leadership.js';

const TTL_MS = 1_500;

/** Who is in office, across every candidate of one test: never more than one. */
class Office {
  readonly holders = new Set<string>();
  readonly journal: string[] = [];
  most = 0;
}

/** Duties that record taking and leaving office; `failNext` makes the next take fail. */
class RecordingDuties implements LeaderDuties {
  readonly tokens: string[] = [];
  readonly reasons: string[] = [];
  failNext = false;

  constructor(
    private readonly name: string,
    private readonly office: Office,
  ) {}

  async takeOffice(token: string): Promise<void> {
    this.office.holders.add(this.name);
    this.office.most = Math.max(this.office.most, this.office.holders.size);
    this.office.journal.push(`${this.name} takes office`);
    if (this.failNext) {
      this.failNext = false;
      throw new Error('could not start');
    }
    this.tokens.push(token);
  }

  async leaveOffice(reason: string): Promise<void> {
    this.office.holders.delete(this.name);
    this.office.journal.push(`${this.name} leaves office`);
    this.reasons.push(reason);
  }
}

function quietLogger(lines: string[]) {
  const keep = (message: string) => void lines.push(message);
  return { log: keep, warn: keep, error: keep };
}

async function eventually<T>(what: string, check: () => T | undefined | Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('leadership', () => {
  let dir: string;
  let server: ServerProcess;
  let redis: RedisConnection;
  const running: Leadership[] = [];
  const clients: RedisConnection[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tributary-leadership-'));
    server = await startRedisServer({ dir });
    redis = await connectRedis(server.url, 'leadership-test');
  });

  afterEach(async () => {
    await Promise.all(running.splice(0).map((l) => l.stop()));
    await Promise.all(clients.splice(0).map((c) => c.close().catch(() => undefined)));
  });

  afterAll(async () => {
    await redis?.close();
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  function candidate(
    prefix: string,
    id: string,
    office: Office,
    client: RedisConnection = redis,
    timing: { ttlMs: number; renewEveryMs?: number } = { ttlMs: TTL_MS },
  ) {
    const lines: string[] = [];
    const duties = new RecordingDuties(id, office);
    const leadership = new Leadership(new LeaderLease(client, leaseKeys(prefix), id, timing.ttlMs), {
      name: `master ${id}`,
      logger: quietLogger(lines),
      renewEveryMs: timing.renewEveryMs,
    });
    running.push(leadership);
    return { leadership, duties, lines, start: () => leadership.start(duties) };
  }

  test('leadership - the first candidate leads, the second stands by and takes office once the first stops', async () => {
    const office = new Office();
    // Frequent renewals on a long lease: a stall of the machine has seconds to pass before the
    // leader's watchdog would give up office, and several renewals still pass in a second.
    const timing = { ttlMs: 6_000, renewEveryMs: 200 };
    const a = candidate('clean', 'a', office, redis, timing);
    const b = candidate('clean', 'b', office, redis, timing);
    expect(a.leadership.fence).toBe(NO_LEASE_TOKEN);
    await a.start();
    await b.start();
    expect(a.leadership.role).toBe('leader');
    expect(a.leadership.holdsLease()).toBe(true);
    expect(a.leadership.fence).toBe(a.duties.tokens[0]);
    expect(b.leadership.role).toBe('standby');
    expect(b.leadership.holdsLease()).toBe(false);
    expect(b.lines).toContain(`master b standing by (leader: ${a.duties.tokens[0]})`);
    // Several renewals pass and nothing changes.
    await new Promise((r) => setTimeout(r, 1_000));
    expect(a.leadership.role).toBe('leader');
    expect(b.duties.tokens).toEqual([]);

    await a.leadership.stop();
    expect(a.duties.reasons).toEqual(['shutting down']);
    await eventually('b to lead', () => (b.leadership.role === 'leader' ? true : undefined));
    expect(leaseEpoch(b.duties.tokens[0]!)).toBeGreaterThan(leaseEpoch(a.duties.tokens[0]!));
    expect(office.journal).toEqual(['a takes office', 'a leaves office', 'b takes office']);
    expect(office.most).toBe(1);
  });

  test('leadership - a leader cut off from Redis leaves office before the standby takes over', async () => {
    const office = new Office();
    const cutOff = await connectRedis(server.url, 'leadership-cut-off');
    clients.push(cutOff);
    const a = candidate('cut', 'a', office, cutOff);
    const b = candidate('cut', 'b', office);
    await a.start();
    await b.start();
    expect(a.leadership.role).toBe('leader');
    // Its connection drops for good: renewals fail, the lease runs out in Redis.
    cutOff.destroy();
    await eventually('b to lead', () => (b.leadership.role === 'leader' ? true : undefined));
    expect(a.leadership.role).toBe('standby');
    expect(a.leadership.holdsLease()).toBe(false);
    expect(a.duties.reasons).toEqual(['no renewal landed before the lease would run out']);
    expect(office.journal).toEqual(['a takes office', 'a leaves office', 'b takes office']);
    expect(office.most).toBe(1);
    // The fence a deposed leader would still write with is its own, now stale, token.
    expect(a.leadership.fence).toBe(a.duties.tokens[0]);
    expect(await redis.get('cut:leader')).toBe(b.duties.tokens[0]);
  });

  test('leadership - a leader whose lease was taken leaves office at the next renewal, and leads again later', async () => {
    const office = new Office();
    const a = candidate('taken', 'a', office);
    await a.start();
    const first = a.duties.tokens[0]!;
    await redis.set('taken:leader', '999:intruder', { PX: TTL_MS });
    await eventually('a to leave', () => (a.duties.reasons.length > 0 ? true : undefined));
    expect(a.duties.reasons).toEqual(['the lease expired or was taken over']);
    expect(a.lines).toContain('master a standing by');
    // Once the intruder's lease runs out, a takes it again under a greater epoch.
    await eventually('a to lead again', () => (a.duties.tokens.length === 2 ? true : undefined));
    expect(leaseEpoch(a.duties.tokens[1]!)).toBeGreaterThan(leaseEpoch(first));
    expect(a.leadership.fence).toBe(a.duties.tokens[1]);
  });

  test('leadership - a write refused by the fence makes the leader leave office; a stale term is ignored', async () => {
    const office = new Office();
    const a = candidate('fenced', 'a', office);
    const b = candidate('fenced', 'b', office);
    await a.start();
    await b.start();
    const token = a.duties.tokens[0]!;
    a.leadership.fenced('1:someone-else');
    expect(a.leadership.role).toBe('leader');
    a.leadership.fenced(token);
    expect(a.leadership.role).toBe('standby');
    expect(a.leadership.holdsLease()).toBe(false);
    // Leaving gives the lease back: a new term starts without waiting for it to expire.
    const next = await eventually('a new term', () =>
      [a, b].map((c) => c.duties.tokens.at(-1)).find((t) => t !== undefined && t !== token),
    );
    expect(leaseEpoch(next)).toBeGreaterThan(leaseEpoch(token));
    expect(a.duties.reasons).toEqual(['a write was refused by the leader fence']);
    expect(office.most).toBe(1);
  });

  test('leadership - a failed start of office gives the lease back and is tried again', async () => {
    const office = new Office();
    const a = candidate('failing', 'a', office);
    a.duties.failNext = true;
    await a.start();
    expect(a.leadership.role).toBe('standby');
    expect(a.duties.reasons).toEqual(['taking office failed']);
    expect(a.lines.some((l) => l.includes('taking office failed: could not start'))).toBe(true);
    await eventually('a to lead', () => (a.leadership.role === 'leader' ? true : undefined));
    expect(office.journal).toEqual(['a takes office', 'a leaves office', 'a takes office']);
  });
});
