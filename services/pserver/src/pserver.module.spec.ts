import 'reflect-metadata';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { NestFactory } from '@nestjs/core';
import type { INestApplicationContext } from '@nestjs/common';
import {
  SUBJECTS,
  connectNats,
  decodeJsonObject,
  openBuckets,
  type Buckets,
  type NatsConnection,
} from '#libs/messaging';
import { KvShardDirectory, ShardedPserverClient, shardKey, type ParamInfo } from '#libs/pserver-client';
import { ConnectionsModule } from '#libs/service-runtime';
import { startTestServers, type TestServers } from '../../../test/support/servers.js';
import type { PserverSettings } from './pserver-config.js';
import { PSERVER_SETTINGS, PserverModule, PserverService } from './pserver.module.js';

const PARAMS: ParamInfo[] = [
  { name: 'w', shape: [3, 2] },
  { name: 'b', shape: [2] },
];
const SPEC = JSON.stringify({ optimizer: { type: 'sgd', learningRate: 0.1 }, evaluation: { everySteps: 1 } });
const ones = () =>
  PARAMS.map((p) => ({ name: p.name, shape: p.shape, data: new Float32Array(p.shape[0] * (p.shape[1] ?? 1)).fill(1) }));

describe('pserver module', () => {
  let servers: TestServers;
  let nc: NatsConnection;
  let buckets: Buckets;

  beforeAll(async () => {
    servers = await startTestServers();
    nc = await connectNats(servers.nats.url, 'pserver module test');
    buckets = await openBuckets(nc);
  });

  afterAll(async () => {
    await nc?.drain();
    await servers?.stop();
  });

  async function startApp(): Promise<INestApplicationContext> {
    const config: PserverSettings = {
      natsUrl: servers.nats.url,
      redisUrl: servers.redis.url,
      id: `pserver-test-${Math.random().toString(16).slice(2, 8)}`,
      logLevel: 'error',
      logFormat: 'text',
      metricsHost: '127.0.0.1',
      metricsPort: 0,
      jsReplicas: 1,
      shard: 0,
      host: '127.0.0.1',
      port: 0,
      dataDir: join(servers.dir, 'pserver-0'),
      memberTtlMs: 30_000,
      cutGraceMs: 4_000,
      leaseTtlMs: 2_000,
      keyPrefix: 'tributary',
      kernels: 'auto',
    };
    const app = await NestFactory.createApplicationContext(
      {
        module: class TestRootModule {},
        imports: [ConnectionsModule.forRoot(config, 'pserver'), PserverModule.forRoot(config)],
      },
      { logger: ['error'], abortOnError: false },
    );
    await app.init();
    return app;
  }

  it('pserver module - registers its address, announces snapshots, follows a restart, deregisters', async () => {
    let app = await startApp();
    const address = app.get(PserverService).address;
    expect(address).toMatch(/^127\.0\.0\.1:\d+$/);
    const entry = await buckets.pservers.get(shardKey(0));
    expect(decodeJsonObject('kv', entry!.value)).toMatchObject({ shard: 0, address, pid: process.pid });

    const notices: Record<string, unknown>[] = [];
    const sub = nc.subscribe(SUBJECTS.snapshots('kv-job'));
    void (async () => {
      for await (const m of sub) notices.push(decodeJsonObject(m.subject, m.data));
    })();

    const directory = await KvShardDirectory.open(buckets.pservers);
    expect(directory.shardCount).toBe(1);
    const client = new ShardedPserverClient({ jobId: 'kv-job', trainerId: 't', params: PARAMS, directory });
    await client.initialize(SPEC, ones);
    await client.join();
    await client.pushGradients(0, 1, ones());
    await nc.flush();
    for (let i = 0; i < 50 && notices.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
    expect(notices[0]).toMatchObject({ jobId: 'kv-job', shard: 0, version: 1 });
    // The member entry says which optimizer kernels run, for `tributary ps`.
    const member = await buckets.members.get(`pserver.${app.get<PserverSettings>(PSERVER_SETTINGS).id}`);
    expect(decodeJsonObject('kv', member!.value)).toMatchObject({ role: 'pserver', kernels: 'wasm-simd' });

    await app.close();
    expect(await buckets.pservers.get(shardKey(0))).toMatchObject({ operation: 'DEL' });
    expect(existsSync(join(servers.dir, 'pserver-0', 'kv-job', 'checkpoint.json'))).toBe(true);

    // A new process for the shard (on another port) resumes from the checkpoint; the client follows.
    app = await startApp();
    expect(app.get(PserverService).address).not.toBe(address);
    const pulled = await client.pullParams(1);
    expect(pulled.versions).toEqual([1]);
    expect(pulled.tensors[1].data[0]).toBeCloseTo(0.9, 6);

    client.close();
    directory.close();
    sub.unsubscribe();
    await app.close();
  });

  it("pserver module - a local round with roundEnd first announces its first delta to the job's trainers", async () => {
    const app = await startApp();
    const spec = JSON.stringify({
      optimizer: { type: 'sgd', learningRate: 0.1 },
      training: { mode: 'local', localSteps: 8, roundEnd: 'first' },
    });
    const notices: Record<string, unknown>[] = [];
    const sub = nc.subscribe(SUBJECTS.rounds('round-job'));
    void (async () => {
      for await (const m of sub) notices.push(decodeJsonObject(m.subject, m.data));
    })();
    const directory = await KvShardDirectory.open(buckets.pservers);
    const [fast, slow] = ['fast', 'slow'].map(
      (trainerId) => new ShardedPserverClient({ jobId: 'round-job', trainerId, params: PARAMS, directory }),
    );
    try {
      await fast!.initialize(spec, ones);
      await fast!.join();
      await slow!.join();
      // Joined after the initialisation, both count from version 1: version 0's round steps alone.
      await fast!.pushGradients(0, 8, ones());
      await fast!.pushGradients(1, 8, ones());
      await nc.flush();
      for (let i = 0; i < 50 && notices.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
      expect(notices).toEqual([{ jobId: 'round-job', shard: 0, version: 1 }]);
      // The slow trainer's delta, of fewer steps, ends the round: nothing more to announce.
      await slow!.pushGradients(1, 3, ones());
      expect((await slow!.pullParams(2)).versions).toEqual([2]);
      await nc.flush();
      expect(notices).toHaveLength(1);
    } finally {
      fast!.close();
      slow!.close();
      directory.close();
      sub.unsubscribe();
      await app.close();
    }
  });
});
