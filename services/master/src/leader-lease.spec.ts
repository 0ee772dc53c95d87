import fc from 'fast-check';
import { startRedisServer, type ServerProcess } from '#libs/local-cluster';
import type { JobSpec } from '#libs/job-spec';
import { connectRedis, type RedisConnection } from '#libs/messaging';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FencedWriteError } from './errors.js';
import { JobStore } from './job-store.js';
import { LeaderLease, leaseEpoch, leaseKeys } from './leader-lease.js';
import { TaskQueue } from './task-queue.js';

describe('leader lease', () => {
  let dir: string;
  let server: ServerProcess;
  let redis: RedisConnection;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tributary-lease-'));
    server = await startRedisServer({ dir });
    redis = await connectRedis(server.url, 'leader-lease-test');
  });

  afterAll(async () => {
    await redis?.close();
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  /**
   * Lets the lease lapse now, as its TTL running out would (Redis expires the key). The leases
   * are taken for far longer than a test runs, so a slow machine cannot lose one earlier.
   */
  async function expireNow(lease: LeaderLease): Promise<void> {
    await redis.pExpire(lease.keys.leader, 1);
    while ((await lease.holder()) !== null) await new Promise((r) => setTimeout(r, 20));
  }

  test('leader lease - the first taker holds it; another is told who holds it and for how long', async () => {
    const a = new LeaderLease(redis, leaseKeys('first'), 'master-a', 5_000);
    const b = new LeaderLease(redis, leaseKeys('first'), 'master-b', 5_000);
    const got = await a.acquire();
    if (!got.acquired) throw new Error('not acquired');
    expect(got.token).toMatch(/^1:master-a:[0-9a-f]{6}$/);
    const refused = await b.acquire();
    expect(refused).toMatchObject({ acquired: false, holder: got.token });
    if (refused.acquired) throw new Error('unreachable');
    expect(refused.remainingMs).toBeGreaterThan(0);
    expect(refused.remainingMs).toBeLessThanOrEqual(5_000);
    expect(await redis.get('first:leader')).toBe(got.token);
  });

  test('leader lease - renewing keeps it; a token that lost it can neither renew nor release it', async () => {
    const a = new LeaderLease(redis, leaseKeys('renew'), 'master-a', 60_000);
    const b = new LeaderLease(redis, leaseKeys('renew'), 'master-b', 60_000);
    const first = await a.acquire();
    if (!first.acquired) throw new Error('not acquired');
    for (let i = 0; i < 3; i += 1) {
      // Close to lapsing, then renewed to its whole TTL.
      await redis.pExpire('renew:leader', 1_000);
      expect(await a.renew(first.token)).toBe(true);
      expect(await redis.pTTL('renew:leader')).toBeGreaterThan(1_000);
    }
    await expireNow(a);
    expect(await a.renew(first.token)).toBe(false);
    const second = await b.acquire();
    if (!second.acquired) throw new Error('not acquired');
    expect(leaseEpoch(second.token)).toBeGreaterThan(leaseEpoch(first.token));
    expect(await a.renew(first.token)).toBe(false);
    expect(await a.release(first.token)).toBe(false);
    expect(await b.holder()).toBe(second.token);
    expect(await b.release(second.token)).toBe(true);
    expect(await b.holder()).toBeNull();
  });

  test('leader lease - after a release a standby takes it at once with a greater epoch', async () => {
    const a = new LeaderLease(redis, leaseKeys('release'), 'master-a', 60_000);
    const b = new LeaderLease(redis, leaseKeys('release'), 'master-b', 60_000);
    const first = await a.acquire();
    if (!first.acquired) throw new Error('not acquired');
    expect((await b.acquire()).acquired).toBe(false);
    expect(await a.release(first.token)).toBe(true);
    const second = await b.acquire();
    expect(second).toMatchObject({ acquired: true, token: expect.stringMatching(/^2:master-b:/) });
  });

  test('leader lease - a deposed holder can never write: the store refuses it with FencedWriteError', async () => {
    const a = new LeaderLease(redis, leaseKeys('fenced'), 'master-a', 60_000);
    const b = new LeaderLease(redis, leaseKeys('fenced'), 'master-b', 60_000);
    const store = new JobStore(redis, 'fenced');
    expect(store.leaderKey).toBe(a.keys.leader);
    const queue = TaskQueue.create(
      { jobId: 'job-a', runId: 'r', taskCount: 2, startedAt: 1 },
      { maxTaskFailures: 1, timeout: { floorMs: 1000, multiplier: 3, window: 20 } },
    );
    const job = {
      spec: { id: 'job-a' } as unknown as JobSpec,
      plan: [],
      submitSeq: 1,
      queue: queue.snapshot(),
    };
    const first = await a.acquire();
    if (!first.acquired) throw new Error('not acquired');
    await store.create(job, first.token);
    await expireNow(a);
    // Expired and not yet taken over: still refused.
    await expect(store.applyTransition('job-a', queue.dispatch(1).change!, first.token)).rejects.toThrow(
      FencedWriteError,
    );
    const second = await b.acquire();
    if (!second.acquired) throw new Error('not acquired');
    const write = store.applyTransition('job-a', queue.dispatch(1).change!, first.token);
    await expect(write).rejects.toThrow(FencedWriteError);
    await expect(write).rejects.toMatchObject({ jobId: 'job-a', fence: first.token });
    await store.applyTransition('job-a', { job: { samples: 3 }, tasks: [] }, second.token);
    const stored = await store.load('job-a');
    expect(stored?.queue.samples).toBe(3);
    expect(stored?.queue.tasks.every((t) => t.status === 'todo')).toBe(true);
  });

  test('leader lease - a holder id taken again after Redis lost the epoch counter still gets a new token', async () => {
    const keys = leaseKeys('reset');
    const a = new LeaderLease(redis, keys, 'master-a', 60_000);
    const first = await a.acquire();
    if (!first.acquired) throw new Error('not acquired');
    await redis.del([keys.leader, keys.epoch]);
    const again = await a.acquire();
    if (!again.acquired) throw new Error('not acquired');
    expect(leaseEpoch(again.token)).toBe(leaseEpoch(first.token));
    expect(again.token).not.toBe(first.token);
    expect(await a.renew(first.token)).toBe(false);
  });

  test('leader lease - tokens grow strictly whoever takes, releases or loses it', async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ holder: fc.constantFrom('a', 'b', 'c'), release: fc.boolean() }), {
          minLength: 1,
          maxLength: 12,
        }),
        async (steps) => {
          run += 1;
          const keys = leaseKeys(`mono-${run}`);
          let last = 0;
          for (const step of steps) {
            const lease = new LeaderLease(redis, keys, step.holder, 60_000);
            const got = await lease.acquire();
            if (!got.acquired) {
              // Held by someone else: it is lost (deleted, as an expiry would) before the next step.
              await redis.del(keys.leader);
              continue;
            }
            const epoch = leaseEpoch(got.token);
            expect(epoch).toBeGreaterThan(last);
            expect(got.token.startsWith(`${epoch}:${step.holder}:`)).toBe(true);
            last = epoch;
            if (step.release) await lease.release(got.token);
          }
        },
      ),
      { numRuns: 25 },
    );
  });
});
