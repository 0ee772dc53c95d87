import { Logger } from '@nestjs/common';
import { jetstreamManager } from '@nats-io/jetstream';
import type { CommonConfig } from '#libs/config';
import type { JobSpec } from '#libs/job-spec';
import {
  connectNats,
  connectRedis,
  decodeJsonObject,
  encodeJson,
  openBuckets,
  type Buckets,
  type JobRecord,
  type NatsConnection,
  type RedisConnection,
} from '#libs/messaging';
import { restartServer } from '../../../test/support/server-restart.js';
import { startTestServers, type TestServers } from '../../../test/support/servers.js';
import { NotInOfficeError } from '../src/errors.js';
import { JobChannels } from '../src/job-channels.js';
import { JobRoster } from '../src/job-roster.js';
import { JobStore } from '../src/job-store.js';
import type { Leadership } from '../src/leadership.js';
import type { MasterConfig } from '../src/master-config.js';
import { eventually } from './master-harness.js';

function record(jobId: string, state: JobRecord['state'], epoch: number): JobRecord {
  return { jobId, state, epoch, spec: { id: jobId } as unknown as JobSpec, startedAt: '2024-01-01T00:00:00Z' };
}

describe('job records', () => {
  let servers: TestServers;
  let nc: NatsConnection;
  let redis: RedisConnection;
  let buckets: Buckets;
  let channels: JobChannels;
  let roster: JobRoster;

  beforeAll(async () => {
    Logger.overrideLogger(['error']);
    servers = await startTestServers();
    nc = await connectNats(servers.nats.url, 'job records test');
    redis = await connectRedis(servers.redis.url, 'job-records-test');
    buckets = await openBuckets(nc);
    const store = new JobStore(redis, 'records');
    channels = new JobChannels(buckets, await jetstreamManager(nc), store, {} as Leadership);
    roster = new JobRoster(channels, { durationWindow: 20 } as unknown as CommonConfig & MasterConfig);
  });

  afterAll(async () => {
    channels?.closeRecords();
    await nc?.close();
    await redis?.close();
    await servers?.stop();
  });

  const stored = async (jobId: string) => {
    const e = await buckets.jobs.get(jobId);
    return e === null ? undefined : decodeJsonObject(jobId, e.value);
  };

  test('job records - an entry whose write failed while NATS was down lands once it is back', async () => {
    await roster.takeOffice('1:master-a:x');
    await servers.nats.stop();
    await expect(channels.putRecord(record('a', 'stopped', 2))).rejects.toThrow();
    await restartServer(servers, 'nats', { downMs: 0 });
    const entry = await eventually(
      'the retried entry of job a',
      () =>
        stored('a').then(
          (e) => e?.['state'],
          () => undefined,
        ),
      30_000,
    );
    expect(entry).toBe('stopped');
    await roster.leaveOffice();
  });

  test('job records - writes not landed when the master leaves office are dropped, never overwriting a newer leader', async () => {
    await roster.takeOffice('2:master-a:y');
    await servers.nats.stop();
    await expect(channels.putRecord(record('b', 'running', 3))).rejects.toThrow();
    const closeRecords = channels.closeRecords.bind(channels);
    const dropped: string[][] = [];
    channels.closeRecords = () => dropped[dropped.push(closeRecords()) - 1];
    await roster.leaveOffice();
    channels.closeRecords = closeRecords;
    // Leaving office dropped the entry still being retried: nothing will try it again.
    expect(dropped).toEqual([['b']]);
    await expect(channels.putRecord(record('b', 'running', 4))).rejects.toThrow(NotInOfficeError);
    await restartServer(servers, 'nats', { downMs: 0 });
    // A newer leader writes the entry, then this master takes office again and writes another job's.
    await eventually('a write by the newer leader', () =>
      buckets.jobs.put('b', encodeJson(record('b', 'stopped', 5))).then(
        () => true,
        () => undefined,
      ),
    );
    await roster.takeOffice('4:master-a:z');
    await channels.putRecord(record('c', 'running', 0));
    expect((await stored('c'))?.['state']).toBe('running');
    expect(await stored('b')).toMatchObject({ state: 'stopped', epoch: 5 });
    await roster.leaveOffice();
  });
});
