import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { decodeJsonObject, openBuckets, connectNats, type NatsConnection } from '#libs/messaging';
import { ConnectionsModule } from '#libs/service-runtime';
import { startTestServers, type TestServers } from '../../../test/support/servers.js';
import { EvaluatorModule, type EvaluatorSettings } from './evaluator.module.js';
import type { SnapshotParamsSource } from './snapshot-params.js';

const noParams: SnapshotParamsSource = {
  loadSnapshot: () => Promise.reject(new Error('no parameters in this test')),
  loadCurrent: () => Promise.reject(new Error('no parameters in this test')),
  release: async () => undefined,
  close: async () => undefined,
};

describe('evaluator module', () => {
  let servers: TestServers;
  let nc: NatsConnection;

  beforeAll(async () => {
    servers = await startTestServers();
    nc = await connectNats(servers.nats.url, 'evaluator module test');
  });

  afterAll(async () => {
    await nc?.drain();
    await servers?.stop();
  });

  it('evaluator module - starts with the chosen backend, announces itself, and stops cleanly', async () => {
    const config: EvaluatorSettings = {
      natsUrl: servers.nats.url,
      redisUrl: servers.redis.url,
      id: 'evaluator-module-test',
      logLevel: 'error',
      logFormat: 'text',
      metricsHost: '127.0.0.1',
      metricsPort: 0,
      jsReplicas: 1,
      backend: 'cpu',
      statusTimeoutMs: 500,
      dataRoots: ['/nonexistent-data'],
      outputRoots: ['/nonexistent-output'],
      niceness: 0,
    };
    const app = await NestFactory.createApplicationContext(
      {
        module: class TestRootModule {},
        imports: [
          ConnectionsModule.forRoot(config, 'evaluator'),
          EvaluatorModule.forRoot(config, { params: noParams }),
        ],
      },
      { logger: ['error'], abortOnError: false },
    );
    await app.init();
    const { members } = await openBuckets(nc);
    let entry = await members.get('evaluator.evaluator-module-test');
    for (let i = 0; i < 100 && entry === null; i++) {
      await new Promise((r) => setTimeout(r, 50));
      entry = await members.get('evaluator.evaluator-module-test');
    }
    expect(decodeJsonObject('members', entry!.value)).toMatchObject({
      role: 'evaluator',
      backend: 'cpu',
      state: 'idle',
    });
    await app.close();
    const after = await members.get('evaluator.evaluator-module-test');
    expect(after === null || after.operation !== 'PUT').toBe(true);
  });
});
