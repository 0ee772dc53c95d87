import type { INestApplicationContext } from '@nestjs/common';
import { jetstream } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { join } from 'node:path';
import { SUBJECTS, encodeJson, ensureStreams } from '#libs/messaging';
import { restartServer } from '../../../test/support/server-restart.js';
import { startTestServers, type TestServers } from '../../../test/support/servers.js';
import { EventLog, FakeTrainer, eventually, jobSpec, startMaster, writeDataset } from './master-harness.js';

/** The claim lease the master runs with: shorter than the NATS outage below. */
const CLAIM_LEASE_MS = 3_000;
const OUTAGE_MS = 6_000;

describe('master and a NATS outage', () => {
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
    nc = await connect({ servers: servers.nats.url, maxReconnectAttempts: -1, reconnectTimeWait: 250 });
    await ensureStreams(nc);
    log = new EventLog(nc);
    master = await startMaster(servers.nats.url, servers.redis.url, 'outage', {
      env: { MASTER_CLAIM_LEASE_MS: String(CLAIM_LEASE_MS) },
    });
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

  test("master nats outage - a claim held through an outage longer than its lease is still the trainer's", async () => {
    await jetstream(nc).publish(
      SUBJECTS.submit,
      encodeJson(jobSpec('outage', data, { training: { taskTimeout: { floorMs: 30_000 } } })),
    );
    await log.waitFor('outage', 'started');
    const held = (await eventually('a task to hold', () => trainer.pull('outage').then((t) => t ?? undefined)))!;
    expect(await trainer.claim(held)).toMatchObject({ ok: true, leaseMs: CLAIM_LEASE_MS });

    // The trainer lives on but cannot renew: NATS is away for twice the lease.
    await restartServer(servers, 'nats', { downMs: OUTAGE_MS });
    trainer.retryForMs = 30_000;
    expect(await trainer.claim(held)).toMatchObject({ ok: true });
    expect(await trainer.report(held, 'done', { samples: 4 })).toEqual({ ok: true, counted: true });
    expect(log.of('outage', 'task-retried')).toEqual([]);
  });
});
