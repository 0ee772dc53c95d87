import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstream } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { connect } from '@nats-io/transport-node';
import { readNatsClientConfig, type NatsClientConfig } from '#libs/config';
import {
  LocalCluster,
  certificateFile,
  freePort,
  keyFile,
  natsClientEnv,
  prepareClusterSecurity,
  readClusterFile,
  readEnvFile,
} from '#libs/local-cluster';
import {
  KV_BUCKETS,
  SUBJECTS,
  connectNats,
  decodeJsonObject,
  encodeJson,
  type JobEvent,
  type NatsConnection,
} from '#libs/messaging';
import { PserverClient, PserverUnavailableError, type PserverTls } from '#libs/pserver-client';
import { runCli } from '../support/cli-run.js';
import { waitForEvent } from '../support/job-events.js';
import { startDashboard } from '../../cli/dashboard/dashboard-app.js';
import { waitUntil } from '../support/chaos-watch.js';
import { ROOT } from '../support/service-process.js';
import { tinyJobSpec, writeTinyDataset } from '../support/tiny-dataset.js';
import { TEST_PATH_ROOTS } from '../support/test-cluster.js';

const JOB_TIMEOUT_MS = 300_000;

describe('secured local cluster, end to end', () => {
  let dir: string;
  let stateDir: string;
  let cluster: LocalCluster;
  let operator: NatsClientConfig;
  let nc: NatsConnection | undefined;
  let trainer: NatsConnection | undefined;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tributary-secure-'));
    stateDir = join(dir, 'cluster');
    cluster = new LocalCluster({
      root: ROOT,
      stateDir,
      natsUrl: `nats://127.0.0.1:${await freePort()}`,
      redisUrl: `redis://127.0.0.1:${await freePort()}`,
      trainers: 1,
      pservers: 2,
      masters: 1,
      evaluators: 1,
      restart: false,
      secure: true,
      env: { TRIBUTARY_BACKEND: 'wasm', LOG_LEVEL: 'log', ...TEST_PATH_ROOTS },
      say: () => undefined,
    });
    await cluster.start();
    const file = readClusterFile(stateDir);
    operator = readNatsClientConfig(readEnvFile(file!.operatorEnvFile!));
  }, 180_000);

  afterAll(async () => {
    await nc?.close();
    await trainer?.close();
    await cluster?.stop();
    if (process.env.TRIBUTARY_KEEP_TEST_DIRS) process.stderr.write(`secure cluster: kept ${dir}\n`);
    else if (dir) rmSync(dir, { recursive: true, force: true });
  }, 120_000);

  test('secured cluster - an anonymous client is refused, with or without a client certificate', async () => {
    const servers = [operator.natsUrl];
    const tls = { caFile: operator.natsTlsCa!, certFile: operator.natsTlsCert!, keyFile: operator.natsTlsKey! };
    await expect(connect({ servers, tls, reconnect: false })).rejects.toThrow(/authorization/i);
    await expect(connect({ servers, tls: { caFile: tls.caFile }, reconnect: false })).rejects.toThrow();
    await expect(connect({ servers, reconnect: false })).rejects.toThrow();
    const wrong = { ...operator, natsPassword: 'not-the-password' };
    await expect(connectNats(wrong, 'wrong password')).rejects.toThrow(/authorization/i);
  });

  test('secured cluster - a trainer cannot submit a job nor write the pserver directory', async () => {
    const security = await prepareClusterSecurity(stateDir, operator.natsUrl);
    const env = natsClientEnv(security, 'trainer');
    trainer = await connectNats(readNatsClientConfig({ NATS_URL: operator.natsUrl, ...env }), 'forger');
    const forged = tinyJobSpec('forged', { train: '/nowhere', eval: '/nowhere' } as never, join(dir, 'forged'));
    await expect(jetstream(trainer).publish(SUBJECTS.submit, encodeJson(forged))).rejects.toThrow(
      /permissions violation/i,
    );
    const directory = await new Kvm(trainer).open(KV_BUCKETS.pservers);
    const before = await directory.get('shard-0');
    await expect(directory.put('shard-0', encodeJson({ address: '10.0.0.1:1' }))).rejects.toThrow(
      /permissions violation/i,
    );
    expect((await directory.get('shard-0'))?.string()).toBe(before?.string());
    // Nor stop a job, or delete a stream.
    await expect(jetstream(trainer).publish(SUBJECTS.stop('any'), encodeJson({}))).rejects.toThrow(
      /permissions violation/i,
    );
  });

  test('secured cluster - a pserver refuses a plain-text gRPC client and a TLS client without a client certificate', async () => {
    const security = await prepareClusterSecurity(stateDir, operator.natsUrl);
    const reader = await connectNats(operator, 'pserver-address');
    let address: string;
    try {
      const entry = await (await new Kvm(reader).open(KV_BUCKETS.pservers)).get('shard-0');
      address = String(decodeJsonObject('shard-0', entry!.value)['address']);
    } finally {
      await reader.close();
    }
    const ca = readFileSync(security.caFile);
    const status = async (tls?: PserverTls) => {
      const client = new PserverClient(address, { tls, callTimeoutMs: 5_000, shard: 0 });
      try {
        return await client.status();
      } finally {
        client.close();
      }
    };
    await expect(status()).rejects.toBeInstanceOf(PserverUnavailableError);
    await expect(status({ ca })).rejects.toBeInstanceOf(PserverUnavailableError);
    // The same address serves a client with the trainers' certificate.
    const trainerTls = {
      ca,
      cert: readFileSync(certificateFile(security, 'trainer')),
      key: readFileSync(keyFile(security, 'trainer')),
    };
    expect(await status(trainerTls)).toMatchObject({ shard: 0 });
  });

  test(
    "secured cluster - a job submitted by the CLI with the operator's credentials runs to its stop, and no service was refused anything",
    async () => {
      const data = await writeTinyDataset(join(dir, 'data'));
      const specFile = join(dir, 'secure-job.json');
      writeFileSync(specFile, JSON.stringify(tinyJobSpec('secure-job', data, join(dir, 'out'))));
      // No NATS settings at all: the CLI takes the operator's from the cluster's state directory.
      const submitted = await runCli(['submit', specFile], { env: { TRIBUTARY_STATE_DIR: stateDir } });
      expect(submitted).toMatchObject({ code: 0 });
      nc = await connectNats(operator, 'secure-test');
      const events = await waitForEvent(nc, 'secure-job', (e) => e.type === 'model-exported' || e.type === 'failed');
      expect(events.at(-1)?.type).toBe('model-exported');
      expect((events.find((e) => e.type === 'stopped') as Extract<JobEvent, { type: 'stopped' }>).reason).toBe(
        'target',
      );

      // The operator's other commands work too, a stop by hand among them.
      const env = { TRIBUTARY_STATE_DIR: stateDir };
      for (const argv of [
        ['status', 'secure-job'],
        ['jobs', '--all', '--json'],
        ['ps', '--json'],
      ]) {
        expect(await runCli(argv, { env })).toMatchObject({ code: 0 });
      }
      // So does the dashboard, which only reads what the operator may read.
      const dashboard = await startDashboard({ nats: operator, root: ROOT, port: 0 });
      try {
        const snapshot = await waitUntil(
          'the dashboard shows the job and the master',
          async () => {
            const body = (await (await fetch(`${dashboard.url}api/snapshot`)).json()) as {
              jobs: { jobId: string }[];
              members: { role: string }[];
            };
            const ready =
              body.jobs.some((j) => j.jobId === 'secure-job') && body.members.some((m) => m.role === 'master');
            return ready ? body : undefined;
          },
          30_000,
        );
        expect(snapshot.members.map((m) => m.role)).toEqual(expect.arrayContaining(['master', 'pserver', 'trainer']));
      } finally {
        await dashboard.close();
      }
      const longSpec = tinyJobSpec('secure-stop', data, join(dir, 'out-stop'), {
        stop: { target: 0.999, maxEpochs: 1000, maxSeconds: 200 },
      });
      writeFileSync(specFile, JSON.stringify(longSpec));
      expect(await runCli(['submit', specFile], { env })).toMatchObject({ code: 0 });
      await waitForEvent(nc, 'secure-stop', (e) => e.type === 'metrics' || e.type === 'failed');
      expect(await runCli(['stop', 'secure-stop'], { env })).toMatchObject({ code: 0 });
      const stopped = await waitForEvent(nc, 'secure-stop', (e) => e.type === 'stopped' || e.type === 'failed');
      expect(stopped.at(-1)).toMatchObject({ type: 'stopped', reason: 'manual' });

      const log = readFileSync(join(stateDir, 'logs', 'nats-server.log'), 'utf8');
      const refused = log.split('\n').filter((l) => /violation/i.test(l) && !/:forger"|authentication error/i.test(l));
      expect(refused).toEqual([]);
    },
    JOB_TIMEOUT_MS,
  );
});
