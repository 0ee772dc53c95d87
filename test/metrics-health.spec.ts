import { join } from 'node:path';
import { credentials } from '@grpc/grpc-js';
import { Kvm } from '@nats-io/kv';
import { HealthClient, type HealthCheckResponse } from '#libs/grpc-health';
import { freePort, startNatsServer, type LocalCluster } from '#libs/local-cluster';
import {
  KV_BUCKETS,
  connectNats,
  encodeJson,
  listBucketKeys,
  openBuckets,
  SUBJECTS,
  type MemberStatus,
  type NatsConnection,
} from '#libs/messaging';
import { shardKey } from '#libs/pserver-client';
import { sampleValue } from '#libs/service-metrics';
import { sleep } from '#libs/retry';
import { waitUntil } from './support/chaos-watch.js';
import { runCli } from './support/cli-run.js';
import { waitForEvent } from './support/job-events.js';
import { startTestServers, type TestServers } from './support/servers.js';
import { startService } from './support/service-process.js';
import { testCluster } from './support/test-cluster.js';
import { tinyJobSpec, writeTinyDataset } from './support/tiny-dataset.js';

/** GETs `url`; the status and body. */
async function get(url: string): Promise<{ status: number; body: string }> {
  const res = await fetch(url);
  return { status: res.status, body: await res.text() };
}

/** Polls `url` until it answers `status`; the last answer. */
async function waitForStatus(
  url: string,
  status: number,
  timeoutMs = 30_000,
): Promise<{ status: number; body: string }> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await get(url);
    if (res.status === status || Date.now() > deadline) return res;
    await sleep(200);
  }
}

/** Asks a pserver's gRPC health service for the status of `service`. */
function healthCheck(address: string, service = ''): Promise<HealthCheckResponse> {
  const client = new HealthClient(address, credentials.createInsecure());
  return new Promise<HealthCheckResponse>((resolve, reject) =>
    client.check({ service }, { deadline: Date.now() + 5_000 }, (err, res) => (err ? reject(err) : resolve(res!))),
  ).finally(() => client.close());
}

describe('metrics and health', () => {
  let servers: TestServers;

  beforeAll(async () => {
    servers = await startTestServers();
  }, 60_000);

  afterAll(async () => {
    await servers?.stop();
  }, 60_000);

  test('metrics and health - a pserver is alive but not ready until NATS is up, serves gRPC health, and is not ready once NATS goes away; its logs are JSON lines', async () => {
    const natsPort = await freePort();
    const natsDir = join(servers.dir, 'own-nats');
    const svc = startService('pserver', {
      NATS_URL: `nats://127.0.0.1:${natsPort}`,
      REDIS_URL: servers.redis.url,
      PSERVER_SHARD: '0',
      PSERVER_DATA_DIR: join(servers.dir, 'pserver-health'),
      PSERVER_KEY_PREFIX: 'health-test',
      LOG_FORMAT: 'json',
    });
    let nats: Awaited<ReturnType<typeof startNatsServer>> | undefined;
    let nc: NatsConnection | undefined;
    try {
      const out = await svc.waitFor(/metrics and health on (http:\/\/[^ ]+) /);
      const base = /metrics and health on (http:\/\/[^ ]+) /.exec(out)![1];
      expect((await get(`${base}/healthz`)).status).toBe(200);
      const before = await get(`${base}/readyz`);
      expect(before.status).toBe(503);
      expect(before.body).toContain(`nats: connecting to nats://127.0.0.1:${natsPort}`);
      expect(before.body).toContain('pserver: starting');

      nats = await startNatsServer({ dir: natsDir, port: natsPort });
      const ready = await waitForStatus(`${base}/readyz`, 200);
      expect(ready).toEqual({ status: 200, body: 'ready\n' });
      const metrics = await get(`${base}/metrics`);
      expect(metrics.body).toContain('# TYPE tributary_pserver_pushes_total counter');
      expect(metrics.body).toContain('process_cpu_seconds_total');

      nc = await connectNats(nats.url, 'metrics test');
      const entry = await (await openBuckets(nc)).pservers.get(shardKey(0));
      const { address } = entry!.json<{ address: string }>();
      expect(await healthCheck(address)).toEqual({ status: 'SERVING' });
      expect(await healthCheck(address, 'tributary.pserver.v1.ParameterServer')).toEqual({ status: 'SERVING' });
      await nc.close();
      nc = undefined;

      await nats.stop();
      const gone = await waitForStatus(`${base}/readyz`, 503);
      expect(gone.status).toBe(503);
      expect(gone.body).toContain('nats: NATS is disconnected; reconnecting');
      expect((await get(`${base}/healthz`)).status).toBe(200);

      const lines = svc
        .output()
        .split('\n')
        .filter((l) => l.trim() !== '');
      expect(lines.length).toBeGreaterThan(3);
      for (const line of lines) {
        const entry = JSON.parse(line) as Record<string, unknown>;
        expect(entry).toMatchObject({ service: 'pserver', pid: svc.child.pid });
        expect(typeof entry.time).toBe('string');
        expect(typeof entry.level).toBe('string');
        expect(typeof entry.message).toBe('string');
      }
    } finally {
      await nc?.close();
      svc.child.kill('SIGKILL');
      await svc.exited;
      await nats?.stop();
    }
  }, 120_000);

  describe('during a job', () => {
    let cluster: LocalCluster;
    let nc: NatsConnection;

    beforeAll(async () => {
      cluster = testCluster(servers, { trainers: 1, pservers: 1 });
      await cluster.start();
      nc = await connectNats(servers.nats.url, 'metrics test');
    }, 120_000);

    afterAll(async () => {
      await nc?.close();
      await cluster?.stop();
    }, 120_000);

    async function members(): Promise<MemberStatus[]> {
      const kv = await new Kvm(nc).open(KV_BUCKETS.members);
      const found: MemberStatus[] = [];
      for (const key of await listBucketKeys(nc, KV_BUCKETS.members)) {
        const entry = await kv.get(key);
        if (entry?.operation === 'PUT') found.push(entry.json<MemberStatus>());
      }
      return found;
    }

    test('metrics and health - every service registers its metrics URL, is ready, and its counters follow the work of a real job', async () => {
      const data = await writeTinyDataset(join(servers.dir, 'data'));
      const jobId = 'metrics-job';
      const spec = tinyJobSpec(jobId, data, join(servers.dir, 'out-metrics'), {
        pservers: { count: 1 },
        // A loss target the tiny model never reaches keeps the job running while it is scraped.
        evaluation: { everySteps: 5, metric: 'loss' },
        stop: { target: 1e-9, maxEpochs: 100, maxSeconds: 120 },
      });
      nc.publish(SUBJECTS.submit, encodeJson(spec));
      const events = await waitForEvent(nc, jobId, (e) => e.type === 'metrics' || e.type === 'failed', 120_000);
      expect(events.at(-1)).toMatchObject({ type: 'metrics' });

      const byRole = new Map((await members()).map((m) => [m.role, m]));
      expect([...byRole.keys()].sort()).toEqual(['evaluator', 'master', 'pserver', 'trainer']);
      const scrape: Record<string, string> = {};
      for (const [role, m] of byRole) {
        expect(m.metricsUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
        const base = m.metricsUrl!.replace(/\/metrics$/, '');
        expect((await get(`${base}/healthz`)).status).toBe(200);
        expect(await get(`${base}/readyz`)).toEqual({ status: 200, body: 'ready\n' });
        scrape[role] = (await get(m.metricsUrl!)).body;
      }

      const job = { job: jobId };
      expect(sampleValue(scrape.trainer, 'tributary_trainer_steps_total', job)).toBeGreaterThan(0);
      expect(sampleValue(scrape.trainer, 'tributary_trainer_samples_total', job)).toBeGreaterThan(0);
      expect(
        sampleValue(scrape.trainer, 'tributary_trainer_step_phase_seconds_count', { ...job, phase: 'train' }),
      ).toBeGreaterThan(0);
      expect(sampleValue(scrape.trainer, 'tributary_trainer_push_seconds_count', job)).toBeGreaterThan(0);
      expect(sampleValue(scrape.trainer, 'tributary_trainer_push_bytes_total', job)).toBeGreaterThan(0);
      expect(sampleValue(scrape.trainer, 'tributary_trainer_pull_bytes_total', job)).toBeGreaterThan(0);

      expect(sampleValue(scrape.pserver, 'tributary_pserver_pushes_total', { ...job, shard: '0' })).toBeGreaterThan(0);
      expect(sampleValue(scrape.pserver, 'tributary_pserver_steps_total', { ...job, shard: '0' })).toBeGreaterThan(0);
      expect(sampleValue(scrape.pserver, 'tributary_pserver_version', { ...job, shard: '0' })).toBeGreaterThan(0);
      // The shard counts the trainer while it trains; between epochs, holding no task, it steps
      // out of the quorum, so one scrape may fall where it counts none.
      const shardMembers = (body: string) => sampleValue(body, 'tributary_pserver_members', { ...job, shard: '0' });
      const counted = await waitUntil(
        'the shard counts the trainer',
        async () => {
          const n = shardMembers((await get(byRole.get('pserver')!.metricsUrl!)).body);
          return n === 1 ? n : undefined;
        },
        20_000,
      );
      expect(counted).toBe(1);
      expect([0, 1]).toContain(shardMembers(scrape.pserver));
      expect(
        sampleValue(scrape.pserver, 'tributary_pserver_update_seconds_count', { ...job, shard: '0' }),
      ).toBeGreaterThan(0);
      expect(
        sampleValue(scrape.pserver, 'tributary_pserver_barrier_wait_seconds_count', { ...job, shard: '0' }),
      ).toBeGreaterThan(0);

      expect(sampleValue(scrape.master, 'tributary_master_leader', {})).toBe(1);
      const tasks = ['todo', 'pending', 'done', 'discarded'].map((state) =>
        sampleValue(scrape.master, 'tributary_master_tasks', { ...job, state }),
      );
      expect(tasks.every((n) => n !== undefined && n >= 0)).toBe(true);
      expect(tasks.reduce((a, b) => a! + b!, 0)).toBeGreaterThan(0);
      // The next epoch's gauge has samples only while that epoch is open; the master declares it.
      expect(scrape.master).toContain('# TYPE tributary_master_next_epoch_tasks gauge');

      expect(sampleValue(scrape.evaluator, 'tributary_evaluator_evaluations_total', job)).toBeGreaterThan(0);
      const loss = sampleValue(scrape.evaluator, 'tributary_evaluator_loss', job);
      expect(loss).toBeGreaterThan(0);
      expect(sampleValue(scrape.evaluator, 'tributary_evaluator_metric', { ...job, metric: 'loss' })).toBe(loss);
      expect(sampleValue(scrape.evaluator, 'tributary_evaluator_evaluation_seconds_count', job)).toBeGreaterThan(0);

      // Work moves the counters: a later scrape of the trainer counts more steps.
      const steps = sampleValue(scrape.trainer, 'tributary_trainer_steps_total', job)!;
      await waitUntil(
        'a later scrape of the trainer with more steps',
        async () => {
          const later = (await get(byRole.get('trainer')!.metricsUrl!)).body;
          return (sampleValue(later, 'tributary_trainer_steps_total', job) ?? 0) > steps || undefined;
        },
        30_000,
      );

      const ps = await runCli(['ps', '--json', '--nats', servers.nats.url]);
      const rows = JSON.parse(ps.stdout) as { role: string; metricsUrl: string }[];
      expect(rows.find((r) => r.role === 'trainer')?.metricsUrl).toBe(byRole.get('trainer')!.metricsUrl);

      nc.publish(SUBJECTS.stop(jobId), encodeJson({ reason: 'manual' }));
      await waitForEvent(nc, jobId, (e) => e.type === 'stopped', 60_000);
    }, 240_000);
  });
});
