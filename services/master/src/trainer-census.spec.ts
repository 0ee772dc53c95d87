import { Logger, type LoggerService } from '@nestjs/common';
import { connectNats, encodeJson, openBuckets, type Buckets, type NatsConnection } from '#libs/messaging';
import { startTestServers, type TestServers } from '../../../test/support/servers.js';
import { TrainerCensus, parseTrainerStatus } from './trainer-census.js';

const TRAINER = { role: 'trainer', id: 't1', pid: 42, host: 'h', state: 'idle', at: '2024-01-01T00:00:00Z' };

describe('trainer census', () => {
  let servers: TestServers;
  let nc: NatsConnection;
  let buckets: Buckets;
  const warnings: string[] = [];
  const logger: LoggerService = {
    log: () => undefined,
    error: () => undefined,
    warn: (m: unknown) => void warnings.push(String(m)),
  };

  beforeAll(async () => {
    servers = await startTestServers();
    nc = await connectNats(servers.nats.url, 'census test');
    buckets = await openBuckets(nc);
    Logger.overrideLogger(logger);
  });

  afterAll(async () => {
    Logger.overrideLogger(['error']);
    await nc?.close();
    await servers?.stop();
  });

  test('trainer census - a trainer status parses; garbage and other roles do not', () => {
    expect(parseTrainerStatus('trainer.t1', encodeJson(TRAINER))).toMatchObject({ id: 't1', state: 'idle' });
    const bad = [
      new TextEncoder().encode('not json'),
      encodeJson([1, 2]),
      encodeJson({ ...TRAINER, role: 'pserver' }),
      encodeJson({ ...TRAINER, id: '' }),
      encodeJson({ ...TRAINER, pid: 'x' }),
      encodeJson({ role: 'trainer' }),
    ];
    for (const data of bad)
      expect(() => parseTrainerStatus('trainer.x', data)).toThrow(/tributary-members\.trainer\.x/);
  });

  test('trainer census - garbage trainer entries are not counted and are warned about once', async () => {
    await buckets.members.put('trainer.t1', encodeJson(TRAINER));
    await buckets.members.put('trainer.t2', encodeJson({ ...TRAINER, id: 't2', state: 'training', jobId: 'j' }));
    await buckets.members.put('trainer.junk', new TextEncoder().encode('{"role": "trai'));
    await buckets.members.put('trainer.wrong', encodeJson({ ...TRAINER, role: 'evaluator' }));
    await buckets.members.put('pserver.shard-0', encodeJson({ ...TRAINER, role: 'pserver' }));
    const census = new TrainerCensus(nc, buckets);

    expect(await census.refresh()).toBe(2);
    expect(await census.refresh()).toBe(2);
    expect(census.count()).toBe(2);
    const garbage = warnings.filter((w) => w.includes('not counted'));
    expect(garbage).toHaveLength(2);
    expect(garbage.some((w) => w.includes('trainer.junk'))).toBe(true);
    expect(garbage.some((w) => w.includes('trainer.wrong'))).toBe(true);

    await buckets.members.delete('trainer.t2');
    expect(await census.refresh()).toBe(1);
  });
});
