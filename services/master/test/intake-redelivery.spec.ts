import { Logger } from '@nestjs/common';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { join } from 'node:path';
import type { CommonConfig } from '#libs/config';
import { validateJobSpec } from '#libs/job-spec';
import {
  SUBJECTS,
  connectNats,
  connectRedis,
  decodeJsonObject,
  encodeJson,
  ensureStreams,
  openBuckets,
  type Buckets,
  type NatsConnection,
  type RedisConnection,
} from '#libs/messaging';
import { indexFiles } from '#libs/recordio';
import { startTestServers, type TestServers } from '../../../test/support/servers.js';
import { JobChannels } from '../src/job-channels.js';
import { JobRoster } from '../src/job-roster.js';
import { JobIntake } from '../src/job-intake.js';
import { queueOptions } from '../src/job-driver.js';
import { withJobSeed } from '../src/job-seed.js';
import { JobStore } from '../src/job-store.js';
import type { Leadership } from '../src/leadership.js';
import {
  DEFAULT_MAX_JOB_PARAMETERS,
  DEFAULT_MAX_JOB_SPEC_BYTES,
  DEFAULT_MAX_RUNNING_JOBS,
  type MasterConfig,
} from '../src/master-config.js';
import { planTasks } from '../src/task-plan.js';
import { MAX_JOB_FAULTS, TaskQueue } from '../src/task-queue.js';
import { EventLog, eventually, jobSpec, writeDataset } from './master-harness.js';

describe('intake redelivery', () => {
  let servers: TestServers;
  let nc: NatsConnection;
  let redis: RedisConnection;
  let buckets: Buckets;
  let log: EventLog;
  let store: JobStore;
  let roster: JobRoster;
  let intake: JobIntake;
  let data: string;

  beforeAll(async () => {
    Logger.overrideLogger(['error']);
    servers = await startTestServers();
    data = join(servers.dir, 'data');
    await writeDataset(data, 1, 16);
    nc = await connectNats(servers.nats.url, 'intake redelivery test');
    redis = await connectRedis(servers.redis.url, 'intake-redelivery-test');
    await ensureStreams(nc);
    buckets = await openBuckets(nc);
    log = new EventLog(nc);
    const jsm = await jetstreamManager(nc);
    const settings = {
      durationWindow: 20,
      maxJobSpecBytes: DEFAULT_MAX_JOB_SPEC_BYTES,
      maxJobParameters: DEFAULT_MAX_JOB_PARAMETERS,
      maxRunningJobs: DEFAULT_MAX_RUNNING_JOBS,
      maxJobFaults: MAX_JOB_FAULTS,
    } as unknown as CommonConfig & MasterConfig;
    store = new JobStore(redis, 'redelivery');
    const channels = new JobChannels(buckets, jsm, store, {} as Leadership);
    roster = new JobRoster(channels, settings);
    intake = new JobIntake(jsm, roster, channels, settings, { dispatchNow: () => undefined });
  });

  afterAll(async () => {
    log?.stop();
    await intake?.leaveOffice();
    await roster?.leaveOffice();
    await nc?.close();
    await redis?.close();
    await servers?.stop();
  });

  test('intake redelivery - a spec whose creation Redis applied without a reply is run, not refused', async () => {
    // The spec waits in the jobs stream while this master already leads with no job.
    await roster.takeOffice('1:master-a:x');
    const raw = jobSpec('lost-reply', data);
    const ack = await jetstream(nc).publish(SUBJECTS.submit, encodeJson(raw));
    // Redis applied the creation from that message, but the master never heard back.
    const spec = withJobSeed(validateJobSpec(raw));
    const plan = planTasks((await indexFiles(spec.dataset.train)).chunks, spec.training.chunksPerTask);
    const queue = TaskQueue.create(
      { jobId: spec.id, runId: 'r1', taskCount: plan.length, startedAt: Date.now() },
      queueOptions(spec, { durationWindow: 20 }),
    );
    await store.create({ spec, plan, submitSeq: ack.seq, queue: queue.snapshot() });
    expect(roster.get(spec.id)).toBeUndefined();

    await intake.takeOffice();

    const started = await log.waitFor(spec.id, 'started');
    expect(started).toMatchObject({ epoch: 0, tasksPerEpoch: plan.length });
    expect(log.of(spec.id, 'failed')).toEqual([]);
    const driver = roster.get(spec.id);
    expect(driver?.running).toBe(true);
    expect(driver?.runId).toBe('r1');
    const entry = await eventually('the jobs-bucket entry', async () => (await buckets.jobs.get(spec.id)) ?? undefined);
    expect(decodeJsonObject(spec.id, entry.value)).toMatchObject({ jobId: spec.id, state: 'running', epoch: 0 });
  });
});
