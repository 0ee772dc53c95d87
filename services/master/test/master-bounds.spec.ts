import type { INestApplicationContext } from '@nestjs/common';
import { jetstream } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { join } from 'node:path';
import { KV_BUCKETS, SUBJECTS, encodeJson, ensureStreams, type JobRecord } from '#libs/messaging';
import { startTestServers, type TestServers } from '../../../test/support/servers.js';
import { EventLog, FakeTrainer, eventually, jobSpec, startMaster, writeDataset } from './master-harness.js';

describe('master bounds', () => {
  let servers: TestServers;
  let nc: NatsConnection;
  let log: EventLog;
  let master: INestApplicationContext | undefined;
  let client: FakeTrainer;
  let data: string;

  const submit = (spec: unknown) => jetstream(nc).publish(SUBJECTS.submit, encodeJson(spec));
  const record = async (jobId: string) => {
    const kv = await new Kvm(nc).open(KV_BUCKETS.jobs);
    return JSON.parse(new TextDecoder().decode((await kv.get(jobId))!.value)) as JobRecord;
  };

  beforeAll(async () => {
    servers = await startTestServers();
    data = join(servers.dir, 'data');
    await writeDataset(data, 2, 32);
    nc = await connect({ servers: servers.nats.url });
    await ensureStreams(nc);
    log = new EventLog(nc);
    client = await FakeTrainer.connect(servers.nats.url, 'client');
    master = await startMaster(servers.nats.url, servers.redis.url, 'bounds', {
      env: { MAX_RUNNING_JOBS: '2', MAX_JOB_PARAMETERS: '1000', MAX_JOB_FAULTS: '2' },
    });
  });

  afterAll(async () => {
    log?.stop();
    await master?.close();
    await client?.close();
    await nc?.close();
    await servers?.stop();
  });

  test('master bounds - a refused spec with a running job id is marked refused and the job goes on', async () => {
    await submit(jobSpec('first', data, { stop: { maxSeconds: 600 } }));
    await log.waitFor('first', 'started');
    await submit({ id: 'first' });
    const refused = await log.waitFor('first', 'failed');
    expect(refused).toMatchObject({ refused: true });
    expect(['running', 'waiting']).toContain((await client.status('first')).state);
    expect(['running', 'waiting']).toContain((await record('first')).state);
  });

  test('master bounds - a model over MAX_JOB_PARAMETERS and a job beyond MAX_RUNNING_JOBS are refused, naming the limit', async () => {
    await submit({ ...jobSpec('huge', data), model: { preset: 'mlp', hiddenUnits: [100_000_000] } });
    const huge = await log.waitFor('huge', 'failed');
    expect(huge).toMatchObject({ field: 'model', refused: true });
    expect(huge.error).toContain('more than MAX_JOB_PARAMETERS (1,000)');
    expect(log.of('huge', 'submitted')).toEqual([]);

    await submit(jobSpec('second', data, { stop: { maxSeconds: 600 } }));
    await log.waitFor('second', 'started');
    await submit(jobSpec('third', data));
    const third = await log.waitFor('third', 'failed');
    expect(third).toMatchObject({ refused: true });
    expect(third.error).toContain('2 jobs are running, as many as MAX_RUNNING_JOBS (2)');
  });

  test('master bounds - after MAX_JOB_FAULTS fault reports the job fails, naming the cause, and frees its place', async () => {
    const { startedAt } = await record('second');
    const fault = (at: string, source: string) =>
      client.request(
        SUBJECTS.jobFault('second'),
        encodeJson({ jobId: 'second', startedAt: at, source, error: 'Invalid typed array length: 78400000000' }),
      );
    // A report on an earlier run of the id is not counted.
    expect(await fault('2001-01-01T00:00:00.000Z', 'trainer-x')).toMatchObject({ ok: true, counted: false });
    expect(await fault(startedAt, 'trainer-a')).toMatchObject({ ok: true, counted: true });
    expect(['running', 'waiting']).toContain((await client.status('second')).state);
    expect(await fault(startedAt, 'trainer-b')).toMatchObject({ ok: true, counted: true });

    const failed = await log.waitFor('second', 'failed');
    expect(failed.refused).toBeUndefined();
    expect(failed.error).toBe(
      '2 attempts to run it failed; the last (trainer-b): Invalid typed array length: 78400000000',
    );
    const status = await client.status('second');
    expect(status).toMatchObject({ state: 'failed', detail: failed.error });
    expect(status.stoppedAt).toBeDefined();
    await eventually('the failed record', async () => ((await record('second')).state === 'failed' ? true : undefined));
    expect((await record('second')).error).toBe(failed.error);
    expect(await fault(startedAt, 'trainer-c')).toMatchObject({ ok: true, counted: false });

    // A failed job no longer counts against MAX_RUNNING_JOBS, and its id may be used again.
    await submit(jobSpec('second', data));
    await eventually('second run', () => (log.of('second', 'started').length === 2 ? true : undefined));
  });
});
