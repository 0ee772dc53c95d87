import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Kvm } from '@nats-io/kv';
import type { BackendChoice } from '#libs/learner';
import { connectNats, decodeJsonObject, KV_BUCKETS, type NatsConnection } from '#libs/messaging';
import { ConnectionsModule } from '#libs/service-runtime';
import { startTestServers, type TestServers } from '../../../test/support/servers.js';
import type { TrainerConfig } from './trainer-config.js';
import { TrainerModule } from './trainer.module.js';
import { describeBackend } from './trainer.service.js';

describe('trainer backend line', () => {
  it('trainer service - the backend line names the webgpu adapter, the wasm SIMD state or the threads', () => {
    const base = { simd: false, threads: 1, skipped: [] };
    expect(describeBackend({ ...base, name: 'webgpu', kind: 'gpu', device: 'nvidia hopper (NVIDIA H100)' })).toBe(
      'gpu (webgpu, nvidia hopper (NVIDIA H100))',
    );
    expect(describeBackend({ ...base, name: 'wasm', kind: 'wasm-simd', simd: true })).toBe(
      'wasm-simd (SIMD on, 1 thread)',
    );
    expect(describeBackend({ ...base, name: 'tensorflow', kind: 'native', threads: 8 })).toBe(
      'native (tensorflow, 8 threads)',
    );
  });
});

describe('trainer service (Nest wiring, real NATS and Redis)', () => {
  let servers: TestServers;
  let nc: NatsConnection;

  beforeAll(async () => {
    servers = await startTestServers();
    nc = await connectNats(servers.nats.url, 'trainer-service-test');
  });

  afterAll(async () => {
    await nc?.close();
    await servers?.stop();
  });

  /** The trainer's Nest wiring against the test servers, with id `id` on `backend`, initialised. */
  async function startTrainerModule(id: string, backend: BackendChoice): Promise<INestApplicationContext> {
    const config = {
      natsUrl: servers.nats.url,
      redisUrl: servers.redis.url,
      id,
      logLevel: 'error' as const,
      logFormat: 'text' as const,
      metricsHost: '127.0.0.1',
      metricsPort: 0,
      jsReplicas: 1,
      backend,
      idleTaskWaitMs: 1_000,
      claimAheadMs: 100,
      progressLogIntervalMs: 10_000,
      pserverOutageBudgetMs: 60_000,
      quorumHeartbeatMs: 2_000,
      kernels: 'auto',
      learnerThread: 'auto',
      chunkCacheMb: 256,
      dataRoots: ['/nonexistent-data'],
    } satisfies TrainerConfig & Record<string, unknown>;
    const app = await NestFactory.createApplicationContext(
      { module: class Root {}, imports: [ConnectionsModule.forRoot(config, 'trainer'), TrainerModule.forRoot(config)] },
      { logger: false },
    );
    await app.init();
    return app;
  }

  it('trainer service - announces its backend in its member entry and removes it on shutdown', async () => {
    const app = await startTrainerModule('trainer-wiring', 'cpu');
    const members = await new Kvm(nc).open(KV_BUCKETS.members);
    const entry = await members.get('trainer.trainer-wiring');
    expect(entry && decodeJsonObject('member', entry.value)).toMatchObject({
      role: 'trainer',
      id: 'trainer-wiring',
      state: 'idle',
      backend: 'cpu',
    });

    await app.close();
    const after = await members.get('trainer.trainer-wiring');
    expect(after === null || after.operation !== 'PUT').toBe(true);
  });

  it('trainer service - on wasm its member entry names the kernel path next to the backend', async () => {
    const app = await startTrainerModule('trainer-wasm', 'wasm');
    try {
      const members = await new Kvm(nc).open(KV_BUCKETS.members);
      const entry = await members.get('trainer.trainer-wasm');
      expect(entry && decodeJsonObject('member', entry.value)).toMatchObject({
        backend: 'wasm-simd',
        kernels: process.env['TRIBUTARY_KERNELS'] === 'js' ? 'js' : 'wasm-simd',
      });
    } finally {
      await app.close();
    }
  });
});

describe('trainer service start-up line', () => {
  const wasm = { name: 'wasm', kind: 'wasm-simd', simd: true, threads: 1, skipped: [] } as const;

  it('trainer service - the start-up line names the kernel path on wasm, and why it is plain JS', () => {
    expect(describeBackend({ ...wasm, skipped: [], kernels: { path: 'wasm-simd' } })).toBe(
      'wasm-simd (SIMD on, 1 thread, wasm-simd kernels)',
    );
    expect(describeBackend({ ...wasm, skipped: [], kernels: { path: 'js', reason: 'TRIBUTARY_KERNELS=js' } })).toBe(
      'wasm-simd (SIMD on, 1 thread, js kernels: TRIBUTARY_KERNELS=js)',
    );
    expect(describeBackend({ name: 'cpu', kind: 'cpu', simd: false, threads: 1, skipped: [] })).toBe(
      'cpu (cpu, 1 thread)',
    );
  });
});
