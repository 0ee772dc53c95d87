import { startRedisServer, type ServerProcess } from '#libs/local-cluster';
import type { JobSpec } from '#libs/job-spec';
import { connectRedis, type RedisConnection } from '#libs/messaging';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CorruptJobStateError, FencedWriteError, LostWritesError } from './errors.js';
import { JobStore } from './job-store.js';
import { planTasks } from './task-plan.js';
import { TaskQueue, type TaskQueueOptions, type TaskState } from './task-queue.js';

const OPTIONS: TaskQueueOptions = { maxTaskFailures: 1, timeout: { floorMs: 1000, multiplier: 3, window: 20 } };
const SPEC = { id: 'job-a', training: { chunksPerTask: 2 } } as unknown as JobSpec;

describe('job store', () => {
  let dir: string;
  let server: ServerProcess;
  let redis: RedisConnection;
  let now = 1_700_000_000_123;
  const clock = () => now;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tributary-store-'));
    server = await startRedisServer({ dir });
    redis = await connectRedis(server.url, 'job-store-test');
  });

  afterAll(async () => {
    await redis?.close();
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  function newJob(jobId: string, taskCount: number) {
    const plan = planTasks(
      Array.from({ length: taskCount * 2 }, (_, i) => ({ file: '/d/a.recordio', offset: i * 10, numRecords: 3 })),
      2,
    );
    const queue = TaskQueue.create({ jobId, runId: 'r', taskCount: plan.length, startedAt: now }, OPTIONS, clock);
    return { plan, queue };
  }

  /** The queue as a restarted master sees it, deadlines aside. */
  function comparable(queue: TaskQueue) {
    const snap = TaskQueue.restore(queue.snapshot(), OPTIONS, clock).snapshot();
    const noDeadline = (tasks: TaskState[]) => tasks.map(({ deadline: _d, ...t }) => t);
    return { ...snap, tasks: noDeadline(snap.tasks), ...(snap.next ? { next: noDeadline(snap.next) } : {}) };
  }

  test('job store - every transition round-trips through Redis', async () => {
    const store = new JobStore(redis, 'rt');
    const { plan, queue } = newJob('job-a', 3);
    await store.create({ spec: SPEC, plan, submitSeq: 7, queue: queue.snapshot() });
    const apply = async (t: { change: Parameters<JobStore['applyTransition']>[1] | null }) => {
      if (t.change) await store.applyTransition('job-a', t.change);
    };
    for (let round = 0; round < 2; round += 1) {
      const d = queue.dispatch(3);
      await apply(d);
      now += 10;
      await apply(queue.claim({ ...d.result[0]!, trainerId: 't1' }));
      await apply(queue.report({ ...d.result[0]!, trainerId: 't1', outcome: 'failed', error: 'x' }));
      await apply(queue.report({ ...d.result[1]!, trainerId: 't1', outcome: 'done', samples: 5 }));
      await apply(queue.report({ ...d.result[2]!, trainerId: 't1', outcome: 'done', samples: 5 }));
      const again = queue.dispatch(1);
      await apply(again);
      await apply(queue.report({ ...again.result[0]!, trainerId: 't1', outcome: 'done', samples: 5 }));
    }
    await apply(queue.dispatch(2));
    await apply(queue.stop('manual', 'by hand'));
    const loaded = await store.load('job-a');
    expect(loaded?.plan).toEqual(plan);
    expect(loaded?.spec).toEqual(SPEC);
    expect(loaded?.submitSeq).toBe(7);
    expect(comparable(TaskQueue.restore(loaded!.queue, OPTIONS, clock))).toEqual(comparable(queue));
    expect(loaded?.queue).toMatchObject({
      epoch: 2,
      state: 'stopped',
      reason: 'manual',
      detail: 'by hand',
      samples: 30,
    });
    expect(loaded?.queue.epochs.slice(0, 2)).toEqual([
      { epoch: 0, done: 3, discarded: 0, doneCounts: { '0': 1, '1': 1, '2': 1 } },
      { epoch: 1, done: 3, discarded: 0, doneCounts: { '0': 1, '1': 1, '2': 1 } },
    ]);
    expect(await store.submission('job-a')).toEqual({ state: 'stopped', submitSeq: 7 });
    expect(await store.jobIds()).toEqual(['job-a']);
  });

  test('job store - the next epoch, open while the current one ends, round-trips and goes when it takes over', async () => {
    const store = new JobStore(redis, 'overlap');
    const { plan, queue } = newJob('job-o', 2);
    await redis.set(store.leaderKey, 'token-1');
    let writes = await store.create({ spec: SPEC, plan, submitSeq: 3, queue: queue.snapshot() }, 'token-1');
    const apply = async (t: { change: Parameters<JobStore['applyTransition']>[1] | null }) => {
      if (t.change) writes = await store.applyTransition('job-o', t.change, 'token-1', writes);
    };
    const nextFields = async () =>
      (await redis.hKeys(store.keys('job-o').tasks)).filter((f) => f.startsWith('next:')).sort();
    const loaded = async () => comparable(TaskQueue.restore((await store.load('job-o'))!.queue, OPTIONS, clock));

    const [a, b] = (await dispatchInto(queue, 2, apply)).result;
    for (const d of [a!, b!]) await apply(queue.claim({ ...d, trainerId: 't1' }));
    await apply(queue.report({ ...a!, trainerId: 't1', outcome: 'done', samples: 3 }));
    // Epoch 0 has nothing left to hand out: epoch 1 opens, and is stored whole.
    const [n0, n1] = (await dispatchInto(queue, 2, apply)).result;
    expect([n0!.epoch, n1!.epoch]).toEqual([1, 1]);
    expect(await nextFields()).toEqual(['next:0', 'next:1']);
    await apply(queue.claim({ ...n0!, trainerId: 't2' }));
    await apply(queue.report({ ...n0!, trainerId: 't2', outcome: 'done', samples: 3 }));
    expect(await redis.hGetAll(store.keys('job-o').epoch(1))).toEqual({ '0': '1' });
    expect(await loaded()).toEqual(comparable(queue));

    // Written whole from memory with the next epoch open, it loads back the same.
    writes = await store.rewrite({ spec: SPEC, plan, submitSeq: 3, queue: queue.snapshot(), writes }, 'token-1');
    expect(await loaded()).toEqual(comparable(queue));

    // Epoch 0 ends: epoch 1 takes over with its done task, and the next epoch's fields go.
    await apply(queue.report({ ...b!, trainerId: 't1', outcome: 'done', samples: 3 }));
    expect(queue.epoch).toBe(1);
    expect(await nextFields()).toEqual([]);
    const back = (await store.load('job-o'))!;
    expect(back.queue.next).toBeUndefined();
    expect(back.queue.tasks.map((t) => t.status)).toEqual(['done', 'pending']);
    expect(await loaded()).toEqual(comparable(queue));

    // Removing the job removes the open epoch's counts too.
    const [m0] = (await dispatchInto(queue, 2, apply)).result;
    expect(m0!.epoch).toBe(2);
    await apply(queue.report({ ...m0!, trainerId: 't2', outcome: 'done', samples: 3 }));
    expect(await redis.exists(store.keys('job-o').epoch(2))).toBe(1);
    await apply(queue.stop('manual'));
    expect(await store.remove('job-o', 'r', 'token-1')).toBe(true);
    expect(await redis.keys('overlap:job:job-o*')).toEqual([]);
  });

  /** Dispatches and persists. */
  async function dispatchInto(
    queue: TaskQueue,
    limit: number,
    apply: (t: { change: Parameters<JobStore['applyTransition']>[1] | null }) => Promise<void>,
  ) {
    const d = queue.dispatch(limit);
    await apply(d);
    return d;
  }

  test('job store - a fenced write lands only while the leader key holds the token', async () => {
    const store = new JobStore(redis, 'fence');
    const { plan, queue } = newJob('job-f', 2);
    await redis.set(store.leaderKey, 'token-1');
    await store.create({ spec: SPEC, plan, submitSeq: 1, queue: queue.snapshot() }, 'token-1');
    const t = queue.dispatch(1);
    await redis.set(store.leaderKey, 'token-2');
    await expect(store.applyTransition('job-f', t.change!, 'token-1')).rejects.toThrow(FencedWriteError);
    expect(JSON.parse((await redis.hGet(store.keys('job-f').tasks, '0'))!)).toMatchObject({ status: 'todo' });
    await store.applyTransition('job-f', t.change!, 'token-2');
    expect(JSON.parse((await redis.hGet(store.keys('job-f').tasks, '0'))!)).toMatchObject({ status: 'pending' });
  });

  test('job store - writes are counted; one after another count is refused, and a rewrite puts the job back whole', async () => {
    const store = new JobStore(redis, 'count');
    const { plan, queue } = newJob('job-c', 2);
    await redis.set(store.leaderKey, 'token-1');
    let writes = await store.create({ spec: SPEC, plan, submitSeq: 4, queue: queue.snapshot() }, 'token-1');
    expect(writes).toBe(1);
    const apply = async (t: { change: Parameters<JobStore['applyTransition']>[1] | null }) => {
      if (t.change) writes = await store.applyTransition('job-c', t.change, 'token-1', writes);
    };
    const d = queue.dispatch(2);
    await apply(d);
    for (const task of d.result) await apply(queue.claim({ ...task, trainerId: 't1' }));
    await apply(queue.report({ ...d.result[0]!, trainerId: 't1', outcome: 'done', samples: 3 }));
    // What Redis would come back with after a crash that lost every later write.
    const older = (await store.load('job-c'))!;
    expect(older).toMatchObject({ writes, writer: 'token-1' });
    await apply(queue.report({ ...d.result[1]!, trainerId: 't1', outcome: 'done', samples: 3 }));
    await apply(queue.dispatch(1));
    expect(queue.epoch).toBe(1);
    const answered = writes;
    await store.rewrite({ ...older, writes: older.writes! - 1 }, 'token-1');

    // The next transition names the count the master made: refused, and nothing changes.
    await expect(
      store.applyTransition('job-c', { job: { samples: 99 }, tasks: [] }, 'token-1', answered),
    ).rejects.toThrow(new LostWritesError('job-c', answered, older.writes!));
    expect(comparable(TaskQueue.restore((await store.load('job-c'))!.queue, OPTIONS, clock))).toEqual(
      comparable(TaskQueue.restore(older.queue, OPTIONS, clock)),
    );

    // Written whole from memory: the closed epoch counts each task once, its summary is back.
    const rewritten = await store.rewrite(
      { spec: SPEC, plan, submitSeq: 4, queue: queue.snapshot(), writes: answered },
      'token-1',
    );
    expect(rewritten).toBe(answered + 1);
    const back = (await store.load('job-c'))!;
    expect(back).toMatchObject({ writes: answered + 1, writer: 'token-1', submitSeq: 4 });
    expect(comparable(TaskQueue.restore(back.queue, OPTIONS, clock))).toEqual(comparable(queue));
    expect(back.queue.epochs.find((e) => e.epoch === 0)).toEqual({
      epoch: 0,
      done: 2,
      discarded: 0,
      doneCounts: { 0: 1, 1: 1 },
    });
    await expect(
      store.applyTransition('job-c', { job: { samples: 9 }, tasks: [] }, 'token-1', rewritten),
    ).resolves.toBe(rewritten + 1);
  });

  test('job store - creating a job again replaces what the earlier one left', async () => {
    const store = new JobStore(redis, 'again');
    const first = newJob('job-r', 2);
    await store.create({ spec: SPEC, plan: first.plan, submitSeq: 1, queue: first.queue.snapshot() });
    const d = first.queue.dispatch(2);
    await store.applyTransition('job-r', d.change!);
    for (const x of d.result) {
      const t = first.queue.report({ ...x, trainerId: 't', outcome: 'done' });
      await store.applyTransition('job-r', t.change!);
    }
    const second = newJob('job-r', 1);
    await store.create({ spec: SPEC, plan: second.plan, submitSeq: 2, queue: second.queue.snapshot() });
    const loaded = await store.load('job-r');
    expect(loaded?.queue.tasks).toHaveLength(1);
    expect(loaded?.queue.epoch).toBe(0);
    expect(loaded?.queue.epochs).toEqual([{ epoch: 0, done: 0, discarded: 0, doneCounts: {} }]);
    expect(await redis.exists(store.keys('job-r').epochs)).toBe(0);
  });

  test('job store - loadAll reports an unreadable job and loads the others', async () => {
    const store = new JobStore(redis, 'all');
    const good = newJob('job-g', 1);
    await store.create({ spec: SPEC, plan: good.plan, submitSeq: 1, queue: good.queue.snapshot() });
    await redis.sAdd(store.jobsKey, 'job-bad');
    await redis.hSet(store.keys('job-bad').job, { state: 'running', epoch: 'x' });
    const { jobs, errors } = await store.loadAll();
    expect(jobs.map((j) => j.queue.jobId)).toEqual(['job-g']);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toBeInstanceOf(CorruptJobStateError);
    expect(errors[0]!.message).toContain('job job-bad: stored state is unreadable: field epoch is not an integer');
  });

  test('job store - removing a job deletes every key of it, fenced, and keeps the others', async () => {
    const store = new JobStore(redis, 'remove');
    const gone = newJob('job-x', 2);
    const kept = newJob('job-y', 1);
    await redis.set(store.leaderKey, 'token-1');
    await store.create({ spec: SPEC, plan: gone.plan, submitSeq: 1, queue: gone.queue.snapshot() }, 'token-1');
    await store.create({ spec: SPEC, plan: kept.plan, submitSeq: 2, queue: kept.queue.snapshot() }, 'token-1');
    const d = gone.queue.dispatch(2);
    await store.applyTransition('job-x', d.change!, 'token-1');
    for (const x of d.result) {
      const t = gone.queue.report({ ...x, trainerId: 't', outcome: 'done' });
      await store.applyTransition('job-x', t.change!, 'token-1');
    }
    await store.applyTransition('job-x', gone.queue.stop('manual').change!, 'token-1');

    await expect(store.remove('job-x', 'r', 'token-0')).rejects.toThrow(FencedWriteError);
    expect(await store.remove('job-x', 'another-run', 'token-1')).toBe(false);
    expect(await store.jobIds()).toEqual(['job-x', 'job-y']);
    expect(await store.remove('job-x', 'r', 'token-1')).toBe(true);
    expect(await store.jobIds()).toEqual(['job-y']);
    expect(await redis.keys('remove:job:job-x*')).toEqual([]);
    expect(await store.load('job-x')).toBeUndefined();
    expect((await store.load('job-y'))?.queue.tasks).toHaveLength(1);
    expect(await store.remove('job-x', 'r', 'token-1')).toBe(true);
  });
});
