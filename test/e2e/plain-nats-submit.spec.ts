import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import type { LocalCluster } from '#libs/local-cluster';
import {
  STREAMS,
  SUBJECTS,
  connectRedis,
  encodeJson,
  type JobEvent,
  type JobListEntry,
  type RedisConnection,
} from '#libs/messaging';
import { waitUntil } from '../support/chaos-watch.js';
import { runCli } from '../support/cli-run.js';
import { waitForEvent } from '../support/job-events.js';
import { testCluster } from '../support/test-cluster.js';
import { startTestServers, type TestServers } from '../support/servers.js';
import { tinyJobSpec, writeTinyDataset } from '../support/tiny-dataset.js';

const JOB_TIMEOUT_MS = 300_000;
/** 18 seconds: long enough for the export, short enough to watch the removal. */
const RETENTION_HOURS = '0.005';

describe('plain NATS submission and job retention, end to end', () => {
  let servers: TestServers;
  let nc: NatsConnection;
  let redis: RedisConnection;
  let cluster: LocalCluster | undefined;

  beforeAll(async () => {
    servers = await startTestServers();
    nc = await connect({ servers: servers.nats.url });
    redis = await connectRedis(servers.redis.url, 'retention-test');
  }, 120_000);

  afterAll(async () => {
    await nc?.close();
    await redis?.close();
    await cluster?.stop();
    await servers?.stop();
  }, 120_000);

  test(
    'submission - a spec sent with a core NATS publish to a fresh NATS, before any master ran, runs to its stop; after JOB_RETENTION_HOURS its records go and its output stays',
    async () => {
      const data = await writeTinyDataset(join(servers.dir, 'data'));
      const output = join(servers.dir, 'out-plain');
      const jsm = await jetstreamManager(nc);
      const streams = async () => {
        const names: string[] = [];
        for await (const name of jsm.streams.names()) names.push(name);
        return names.sort();
      };
      expect(await streams()).toEqual([]);

      // `tributary up` declares the streams before it starts any service: here it starts none.
      const bare = testCluster(servers, {
        stateDir: join(servers.dir, 'bare'),
        masters: 0,
        pservers: 0,
        trainers: 0,
        evaluators: 0,
      });
      await bare.start();
      await bare.stop();
      expect(await streams()).toEqual(
        Object.values(STREAMS)
          .map((s) => s.name)
          .sort(),
      );

      // What `nats pub tributary.jobs.submit "$(cat spec.json)"` does: a core publish, no JetStream API.
      nc.publish(SUBJECTS.submit, encodeJson(tinyJobSpec('plain-job', data, output)));
      await nc.flush();

      cluster = testCluster(servers, {
        env: { TRIBUTARY_BACKEND: 'wasm', LOG_LEVEL: 'log', JOB_RETENTION_HOURS: RETENTION_HOURS },
      });
      await cluster.start();
      const events = await waitForEvent(nc, 'plain-job', (e) => e.type === 'model-exported' || e.type === 'failed');
      expect(events.at(-1)?.type).toBe('model-exported');
      expect((events.find((e) => e.type === 'stopped') as Extract<JobEvent, { type: 'stopped' }>).reason).toBe(
        'target',
      );

      const env = { NATS_URL: servers.nats.url, TRIBUTARY_STATE_DIR: join(servers.dir, 'cluster') };
      const listed = JSON.parse((await runCli(['jobs', '--all', '--json'], { env })).stdout) as JobListEntry[];
      expect(listed.map((j) => [j.jobId, j.state])).toEqual([['plain-job', 'stopped']]);
      const checkpoints = [0, 1].map((i) => join(servers.dir, 'cluster', `pserver-${i}`, 'plain-job'));
      for (const dir of checkpoints) expect(existsSync(dir)).toBe(true);

      // Past the retention: Redis state, jobs-bucket entry, stream messages and checkpoints go.
      await waitUntil(
        'the removal of plain-job',
        async () => ((await redis.keys('tributary:job:plain-job*')).length === 0 ? true : undefined),
        90_000,
      );
      expect(await redis.sMembers('tributary:jobs')).toEqual([]);
      for (const subject of [SUBJECTS.events('plain-job'), SUBJECTS.snapshots('plain-job')]) {
        const stream = subject === SUBJECTS.events('plain-job') ? STREAMS.events.name : STREAMS.snapshots.name;
        const last = await jsm.streams.getMessage(stream, { last_by_subj: subject }).catch(() => null);
        expect(last).toBeNull();
      }
      await waitUntil(
        'the checkpoints of plain-job to go',
        () => (checkpoints.some(existsSync) ? undefined : true),
        30_000,
      );
      const after = JSON.parse((await runCli(['jobs', '--all', '--json'], { env })).stdout) as JobListEntry[];
      expect(after).toEqual([]);
      for (const file of ['model.json', 'summary.json', 'events.jsonl', 'metrics.jsonl'])
        expect(existsSync(join(output, file))).toBe(true);
    },
    JOB_TIMEOUT_MS,
  );
});
