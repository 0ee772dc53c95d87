import type { INestApplicationContext } from '@nestjs/common';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { appendFileSync } from 'node:fs';
import { join } from 'node:path';
import { createClient } from 'redis';
import { validateJobSpec } from '#libs/job-spec';
import { KV_BUCKETS, STREAMS, SUBJECTS, encodeJson, ensureStreams, type JobRecord } from '#libs/messaging';
import { startTestServers, type TestServers } from '../../../test/support/servers.js';
import { DEFAULT_PARTITION_MIN_ELEMENTS } from '../src/job-partition.js';
import { EventLog, FakeTrainer, eventually, jobSpec, startMaster, writeDataset } from './master-harness.js';

describe('master intake', () => {
  let servers: TestServers;
  let nc: NatsConnection;
  let log: EventLog;
  let master: INestApplicationContext | undefined;
  let client: FakeTrainer;
  let data: string;

  beforeAll(async () => {
    servers = await startTestServers();
    data = join(servers.dir, 'data');
    await writeDataset(data, 2, 32);
    nc = await connect({ servers: servers.nats.url });
    await ensureStreams(nc);
    log = new EventLog(nc);
    client = await FakeTrainer.connect(servers.nats.url, 'client');
  });

  afterAll(async () => {
    log?.stop();
    await master?.close();
    await client?.close();
    await nc?.close();
    await servers?.stop();
  });

  test('master intake - specs published before the master starts are taken; bad ones are refused with the field', async () => {
    expect(() => validateJobSpec(jobSpec('good', data))).not.toThrow();
    const corruptDir = join(servers.dir, 'corrupt');
    await writeDataset(corruptDir, 1, 8);
    const corruptFile = join(corruptDir, 'train-0.recordio');
    appendFileSync(
      corruptFile,
      Buffer.from([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21]),
    );
    nc.publish(SUBJECTS.submit, new TextEncoder().encode('{"id": "broken", oops'));
    nc.publish(
      SUBJECTS.submit,
      encodeJson({ ...jobSpec('bad-lr', data), optimizer: { type: 'sgd', learningRate: -1 } }),
    );
    nc.publish(SUBJECTS.submit, encodeJson(jobSpec('no-files', join(servers.dir, 'nowhere'))));
    nc.publish(SUBJECTS.submit, encodeJson(jobSpec('corrupt', corruptDir)));
    nc.publish(SUBJECTS.submit, encodeJson(jobSpec('good', data)));
    await nc.flush();

    master = await startMaster(servers.nats.url, servers.redis.url, 'intake');

    const started = await log.waitFor('good', 'started');
    expect(started).toMatchObject({ epoch: 0, tasksPerEpoch: 8, records: 32 });
    // The spec gives no seed: the master picked one, reports it and stores it with the spec.
    const seed = (started as { seed?: number }).seed;
    expect(Number.isInteger(seed)).toBe(true);
    const invalid = await log.waitFor('invalid', 'failed');
    expect(invalid).toMatchObject({ field: '(root)' });
    expect(invalid.error).toContain('not valid JSON');
    expect(await log.waitFor('bad-lr', 'failed')).toMatchObject({ field: 'optimizer.learningRate' });
    const noFiles = await log.waitFor('no-files', 'failed');
    expect(noFiles).toMatchObject({ field: 'dataset.train' });
    expect(noFiles.error).toContain('nowhere');
    const corrupt = await log.waitFor('corrupt', 'failed');
    expect(corrupt.field).toBe('dataset.train');
    expect(corrupt.error).toContain(corruptFile);
    expect(corrupt.error).toMatch(/at byte \d+/);

    const kv = await new Kvm(nc).open(KV_BUCKETS.jobs);
    const record = JSON.parse(new TextDecoder().decode((await kv.get('good'))!.value)) as JobRecord;
    // Nor does it say how to cut parameters: the master stored the default with it.
    expect(record).toMatchObject({
      jobId: 'good',
      epoch: 0,
      spec: {
        training: { seed, shuffle: true },
        pservers: { partition: { minElements: DEFAULT_PARTITION_MIN_ELEMENTS } },
      },
    });
    expect((await client.status('good')).seed).toBe(seed);
    expect(['running', 'waiting']).toContain(record.state);
    expect(await kv.get('bad-lr')).toBeNull();
    expect((await client.status('bad-lr')).error).toBe('unknown job bad-lr');
  });

  test('master intake - a second spec with the id of a running job is refused', async () => {
    const before = log.of('good', 'failed').length;
    await jetstream(nc).publish(SUBJECTS.submit, encodeJson(jobSpec('good', data)));
    const failed = await eventually('already-exists event', () => log.of('good', 'failed')[before]);
    expect(failed).toMatchObject({ field: 'id', error: 'job good already exists and is running' });
    expect(log.of('good', 'started')).toHaveLength(1);
  });

  test('master intake - garbage on the request subjects is answered with an error and the master keeps serving', async () => {
    const claim = await client.request(SUBJECTS.taskClaim('good'), 'not json at all');
    expect(String(claim['error'])).toContain('tributary.jobs.good.tasks.claim');
    const report = await client.request(SUBJECTS.taskReport('good'), encodeJson({ jobId: 'good', taskId: 'x' }));
    expect(String(report['error'])).toContain('taskId');
    const unknown = await client.request(
      SUBJECTS.taskClaim('ghost'),
      encodeJson({ jobId: 'ghost', taskId: 0, epoch: 0, dispatchId: 'd', trainerId: 't' }),
    );
    expect(unknown['error']).toContain('unknown job ghost');
    expect((await client.status('good')).jobId).toBe('good');
  });

  test('master intake - a stop message with a garbage body stops the job as manual and persists it', async () => {
    const js = jetstream(nc);
    await js.publish(SUBJECTS.stop('good'), new TextEncoder().encode('stop it!'));
    const stopped = await log.waitFor('good', 'stopped');
    expect(stopped).toMatchObject({ reason: 'manual' });
    expect(stopped.detail).toContain('not JSON');
    const status = await client.status('good');
    expect(status).toMatchObject({ state: 'stopped', reason: 'manual' });
    expect(status.stoppedAt).toBeDefined();
    const kv = await new Kvm(nc).open(KV_BUCKETS.jobs);
    const record = JSON.parse(new TextDecoder().decode((await kv.get('good'))!.value)) as JobRecord;
    expect(record).toMatchObject({ state: 'stopped', reason: 'manual' });

    const redis = createClient({ url: servers.redis.url });
    await redis.connect();
    expect(await redis.hmGet('intake:job:good', ['state', 'reason'])).toEqual(['stopped', 'manual']);
    await redis.close();

    // A later stop is ignored: the first reason stands.
    const later = await js.publish(SUBJECTS.stop('good'), encodeJson({ reason: 'target' }));
    // The master took it from the control stream (a work queue: taken means acknowledged)...
    const jsm = await jetstreamManager(nc);
    await eventually('the later stop taken', async () => {
      const left = await jsm.streams.getMessage(STREAMS.control.name, { seq: later.seq }).catch(() => null);
      return left === null ? true : undefined;
    });
    // ...and declined it.
    expect(log.of('good', 'stopped')).toHaveLength(1);
    expect((await client.status('good')).reason).toBe('manual');
  });

  test('master intake - a stopped job id may be submitted again and starts afresh', async () => {
    await jetstream(nc).publish(SUBJECTS.submit, encodeJson(jobSpec('good', data, { stop: { maxEpochs: 5 } })));
    await eventually('second start', () => (log.of('good', 'started').length === 2 ? true : undefined));
    const status = await client.status('good');
    expect(status).toMatchObject({ epoch: 0, tasks: { total: 8 } });
    expect(['running', 'waiting']).toContain(status.state);
  });
});
