import type { INestApplicationContext } from '@nestjs/common';
import { jetstream } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { join } from 'node:path';
import {
  KV_BUCKETS,
  SUBJECTS,
  connectRedis,
  encodeJson,
  ensureStreams,
  type JobRecord,
  type MemberStatus,
  type RedisConnection,
} from '#libs/messaging';
import { startTestServers, type TestServers } from '../../../test/support/servers.js';
import { JobStore } from '../src/job-store.js';
import { EventLog, FakeTrainer, eventually, jobSpec, startMaster, writeDataset } from './master-harness.js';

const PREFIX = 'takeover';
const MASTER_ID = 'master-takeover';

/** In-process masters whose lease is taken from them, or that inherit half-finished work. */
/**
 * Lease of the master under test: short, so a takeover is seen soon, but long enough that a busy
 * 2-core machine does not let it lapse between renewals (at 900 ms one claim was refused in CI).
 */
const LEASE_TTL_MS = 3_000;

describe('master takeover', () => {
  let servers: TestServers;
  let nc: NatsConnection;
  let redis: RedisConnection;
  let log: EventLog;
  let trainer: FakeTrainer;
  let data: string;
  let master: INestApplicationContext | undefined;

  beforeAll(async () => {
    servers = await startTestServers();
    data = join(servers.dir, 'data');
    await writeDataset(data, 2, 32);
    nc = await connect({ servers: servers.nats.url });
    await ensureStreams(nc);
    redis = await connectRedis(servers.redis.url, 'takeover-test');
    log = new EventLog(nc);
    trainer = await FakeTrainer.connect(servers.nats.url, 'trainer-1');
    await trainer.register();
    master = await startMaster(servers.nats.url, servers.redis.url, PREFIX, {
      id: MASTER_ID,
      leaseTtlMs: LEASE_TTL_MS,
    });
  });

  afterAll(async () => {
    log?.stop();
    await master?.close();
    await trainer?.close();
    await redis?.close();
    await nc?.close();
    await servers?.stop();
  });

  async function presence(): Promise<MemberStatus | undefined> {
    const entry = await (await new Kvm(nc).open(KV_BUCKETS.members)).get(`master.${MASTER_ID}`);
    return entry?.operation === 'PUT' ? entry.json<MemberStatus>() : undefined;
  }

  test('master takeover - a master whose lease is taken answers and writes nothing until it leads again', async () => {
    await jetstream(nc).publish(SUBJECTS.submit, encodeJson(jobSpec('deposed', data, { stop: { maxEpochs: 1 } })));
    await log.waitFor('deposed', 'started');
    const held = await eventually('a task', () => trainer.pull('deposed').then((t) => t ?? undefined));
    expect((await trainer.claim(held)).ok).toBe(true);

    // Another holder takes the lease: at its next renewal the master leaves office.
    await redis.set(`${PREFIX}:leader`, '1000:intruder:000000', { PX: 60_000 });
    await eventually('the master to stop answering', () =>
      trainer.status('deposed').then(
        () => undefined,
        () => true,
      ),
    );
    await expect(trainer.report(held, 'done', { samples: 4 })).rejects.toThrow();
    expect(await presence()).toMatchObject({ state: 'standby', leader: false });
    const stored = await new JobStore(redis, PREFIX).load('deposed');
    expect(stored?.queue.tasks[held.taskId]).toMatchObject({ status: 'pending', dispatchId: held.dispatchId });
    expect(stored?.queue.epochs[0]?.doneCounts).toEqual({});

    // The intruder's lease ends: the master leads again, reloads the job, and counts the report once.
    await redis.del(`${PREFIX}:leader`);
    trainer.retryForMs = 20_000;
    try {
      expect(await trainer.report(held, 'done', { samples: 4 })).toEqual({ ok: true, counted: true });
      expect(await trainer.report(held, 'done', { samples: 4 })).toEqual({ ok: true, counted: false });
    } finally {
      trainer.retryForMs = 0;
    }
    expect(await presence()).toMatchObject({ state: 'leader', leader: true });
    expect((await trainer.status('deposed')).epochs[0]?.doneCounts).toEqual({ [String(held.taskId)]: 1 });
  });

  test('master takeover - a stop the last leader persisted but never announced is announced by the next', async () => {
    await jetstream(nc).publish(SUBJECTS.submit, encodeJson(jobSpec('half-stopped', data, { stop: { maxEpochs: 5 } })));
    await log.waitFor('half-stopped', 'started');
    await master!.close();
    master = undefined;
    // The leader persisted the stop and died before purging, updating the jobs bucket and publishing.
    await new JobStore(redis, PREFIX).applyTransition('half-stopped', {
      job: { state: 'stopped', reason: 'target', detail: 'accuracy 0.9', stoppedAt: Date.now() },
      tasks: [],
    });
    const jobs = await new Kvm(nc).open(KV_BUCKETS.jobs);
    expect((await jobs.get('half-stopped'))?.json<JobRecord>().state).toBe('running');

    master = await startMaster(servers.nats.url, servers.redis.url, PREFIX, {
      id: MASTER_ID,
      leaseTtlMs: LEASE_TTL_MS,
    });
    expect(await log.waitFor('half-stopped', 'stopped')).toMatchObject({ reason: 'target', detail: 'accuracy 0.9' });
    expect((await jobs.get('half-stopped'))?.json<JobRecord>()).toMatchObject({ state: 'stopped', reason: 'target' });
    expect(await trainer.pull('half-stopped')).toBeNull();
    // Announced once: a later takeover finds it announced and stays quiet.
    await master.close();
    master = await startMaster(servers.nats.url, servers.redis.url, PREFIX, {
      id: MASTER_ID,
      leaseTtlMs: LEASE_TTL_MS,
    });
    expect((await trainer.status('half-stopped')).state).toBe('stopped');
    expect(log.of('half-stopped', 'stopped')).toHaveLength(1);
  });
});
