import type { INestApplicationContext } from '@nestjs/common';
import { jetstream } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { join } from 'node:path';
import { Kvm } from '@nats-io/kv';
import { KV_BUCKETS, SUBJECTS, encodeJson, ensureStreams, type TaskMessage } from '#libs/messaging';
import { startTestServers, type TestServers } from '../../../test/support/servers.js';
import { EventLog, FakeTrainer, eventually, jobSpec, startMaster, writeDataset } from './master-harness.js';

describe('master tasks', () => {
  let servers: TestServers;
  let nc: NatsConnection;
  let log: EventLog;
  let master: INestApplicationContext | undefined;
  let trainer: FakeTrainer;
  let data: string;

  beforeAll(async () => {
    servers = await startTestServers();
    data = join(servers.dir, 'data');
    await writeDataset(data, 2, 32);
    nc = await connect({ servers: servers.nats.url });
    await ensureStreams(nc);
    log = new EventLog(nc);
    master = await startMaster(servers.nats.url, servers.redis.url, 'tasks');
    trainer = await FakeTrainer.connect(servers.nats.url, 'trainer-1');
    await trainer.register();
  });

  afterAll(async () => {
    log?.stop();
    await master?.close();
    await trainer?.close();
    await nc?.close();
    await servers?.stop();
  });

  async function submit(spec: object): Promise<void> {
    await jetstream(nc).publish(SUBJECTS.submit, encodeJson(spec));
  }

  test('master tasks - a trainer completes two epochs, each task counted exactly once per epoch', async () => {
    await submit(jobSpec('two-epochs', data, { stop: { maxEpochs: 2 } }));
    await log.waitFor('two-epochs', 'started');
    const done = await trainer.work('two-epochs', () => log.of('two-epochs', 'stopped').length > 0);
    expect(done).toBe(16);
    const stopped = await log.waitFor('two-epochs', 'stopped');
    expect(stopped).toMatchObject({
      reason: 'maxEpochs',
      detail: 'epoch budget spent: 2 epochs completed, stop.maxEpochs is 2',
    });
    expect(log.of('two-epochs', 'epoch')).toEqual([
      expect.objectContaining({ epoch: 1, done: 8, discarded: 0 }),
      expect.objectContaining({ epoch: 2, done: 8, discarded: 0 }),
    ]);
    const status = await trainer.status('two-epochs');
    expect(status).toMatchObject({ state: 'stopped', reason: 'maxEpochs', epoch: 2, samples: 64 });
    const allOnce = Object.fromEntries(Array.from({ length: 8 }, (_, i) => [String(i), 1]));
    expect(status.epochs.filter((e) => e.epoch < 2)).toEqual([
      { epoch: 0, done: 8, discarded: 0, doneCounts: allOnce },
      { epoch: 1, done: 8, discarded: 0, doneCounts: allOnce },
    ]);
  });

  test('master tasks - a stale report is ignored and an unreported task times out and is dispatched again', async () => {
    await submit(jobSpec('timeouts', data, { stop: { maxEpochs: 1 }, training: { maxTaskFailures: 3 } }));
    await log.waitFor('timeouts', 'started');
    // A dispatch nobody claims within the 1 s floor goes back to todo with no failure, and out
    // again: on a slow machine the first one pulled may be that late, so claim until one is ours.
    const first = (await eventually('a claimed task', async () => {
      const task = await trainer.pull('timeouts');
      return task !== null && (await trainer.claim(task)).ok ? task : undefined;
    }))!;
    // Claimed and never reported: after the 1 s floor it counts a failure and goes out again.
    const retried = await log.waitFor('timeouts', 'task-retried', 10_000);
    expect(retried).toMatchObject({ taskId: first.taskId, failures: 1, error: 'timeout' });
    expect(await trainer.report(first, 'done')).toEqual({ ok: true, counted: false });
    let again: TaskMessage | undefined;
    const done = await trainer.work(
      'timeouts',
      () => log.of('timeouts', 'stopped').length > 0,
      async (task) => {
        if (task.taskId === first.taskId) again = task;
        return true;
      },
    );
    expect(done).toBe(8);
    expect(again).toBeDefined();
    expect(again!.dispatchId).not.toBe(first.dispatchId);
    expect(await trainer.claim(first)).toEqual({ ok: false, reason: 'stopped' });
    const status = await trainer.status('timeouts');
    expect(status.epochs[0]).toMatchObject({ epoch: 0, done: 8, discarded: 0 });
    expect(Object.values(status.epochs[0]!.doneCounts)).toEqual(Array(8).fill(1));
  });

  test('master tasks - a master restarted mid-job resumes the epoch and its pending tasks', async () => {
    await submit(jobSpec('restart', data, { stop: { maxEpochs: 2 }, training: { taskTimeout: { floorMs: 30_000 } } }));
    await log.waitFor('restart', 'started');
    // Finish epoch 0 and three tasks of epoch 1, then hold one task claimed across the restart.
    let counted = 0;
    await trainer.work(
      'restart',
      () => counted >= 11,
      async () => {
        counted += 1;
        return true;
      },
    );
    const held = (await eventually('a task to hold', () => trainer.pull('restart').then((t) => t ?? undefined)))!;
    expect((await trainer.claim(held)).ok).toBe(true);
    const before = await trainer.status('restart');
    expect(before).toMatchObject({ epoch: 1, tasks: { done: 3 } });

    await master!.close();
    master = await startMaster(servers.nats.url, servers.redis.url, 'tasks');

    const after = await trainer.status('restart');
    expect(after).toMatchObject({ epoch: 1, tasks: { total: 8, done: 3 } });
    expect(after.tasks.pending).toBeGreaterThanOrEqual(1);
    expect(after.epochs[0]).toMatchObject({ epoch: 0, done: 8 });
    // The report of the task claimed before the restart still counts.
    expect(await trainer.report(held, 'done', { samples: 4 })).toEqual({ ok: true, counted: true });
    await trainer.work('restart', () => log.of('restart', 'stopped').length > 0);
    expect((await log.waitFor('restart', 'stopped')).reason).toBe('maxEpochs');
    const status = await trainer.status('restart');
    const allOnce = Object.fromEntries(Array.from({ length: 8 }, (_, i) => [String(i), 1]));
    expect(status.epochs.filter((e) => e.epoch < 2).map((e) => e.doneCounts)).toEqual([allOnce, allOnce]);
  });

  test('master tasks - with fewer live trainers than trainers.min the job waits and dispatches nothing', async () => {
    await submit(jobSpec('quorum', data, { trainers: { min: 2 } }));
    const waiting = await log.waitFor('quorum', 'waiting');
    expect(waiting).toMatchObject({ trainers: 1, min: 2 });
    expect(await trainer.status('quorum')).toMatchObject({ state: 'waiting', trainers: 1, tasks: { pending: 0 } });
    expect(await trainer.pull('quorum')).toBeNull();
    const second = await FakeTrainer.connect(servers.nats.url, 'trainer-2');
    try {
      await second.register();
      await eventually('dispatching', async () =>
        (await trainer.status('quorum')).state === 'running' ? true : undefined,
      );
      const task = await eventually('a task', () => trainer.pull('quorum').then((t) => t ?? undefined));
      expect((await trainer.claim(task)).ok).toBe(true);
    } finally {
      await second.close();
    }
    await jetstream(nc).publish(SUBJECTS.stop('quorum'), encodeJson({ reason: 'patience', detail: 'no progress' }));
    expect(await log.waitFor('quorum', 'stopped')).toMatchObject({ reason: 'patience', detail: 'no progress' });
  });

  test('master tasks - stop.maxSeconds ends a job on the master alone, with no evaluator and no task done', async () => {
    await submit(jobSpec('time-budget', data, { stop: { maxSeconds: 1 }, trainers: { min: 5 } }));
    const stopped = await log.waitFor('time-budget', 'stopped', 10_000);
    expect(stopped.reason).toBe('maxSeconds');
    expect(stopped.detail).toMatch(/^time budget spent: \d+\.\d s since the job started, stop\.maxSeconds is 1$/);
    expect(await trainer.status('time-budget')).toMatchObject({
      state: 'stopped',
      reason: 'maxSeconds',
      tasks: { done: 0 },
    });
  });

  test('master tasks - the master shows itself in the members bucket as leader', async () => {
    const members = await new Kvm(nc).open(KV_BUCKETS.members);
    const keys: string[] = [];
    for await (const key of await members.keys('master.*')) keys.push(key);
    expect(keys).toHaveLength(1);
    const entry = JSON.parse(new TextDecoder().decode((await members.get(keys[0]!))!.value)) as Record<string, unknown>;
    expect(entry).toMatchObject({ role: 'master', state: 'leader', leader: true });
  });
});
