import { jetstream } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { join } from 'node:path';
import {
  KV_BUCKETS,
  SUBJECTS,
  decodeJsonObject,
  encodeJson,
  ensureStreams,
  type JobStatusReply,
  type MemberStatus,
} from '#libs/messaging';
import { epochTaskOrder } from '#libs/data-order';
import { LocalCluster } from '#libs/local-cluster';
import { runCli } from '../../../test/support/cli-run.js';
import { startTestServers, type TestServers } from '../../../test/support/servers.js';
import { ROOT, startService, type RunningService } from '../../../test/support/service-process.js';
import { EventLog, FakeTrainer, eventually, jobSpec, writeDataset } from './master-harness.js';

const LEASE_TTL_MS = 2_000;
const JOB = 'failover-job';
const TASKS = 8;

/**
 * Real master processes (from `dist/`, so run `npm run build` first) over real NATS and Redis:
 * a leader and a standby, the leader killed with SIGKILL in the middle of a job.
 */
describe('master failover', () => {
  let servers: TestServers;
  let nc: NatsConnection;
  let log: EventLog;
  let trainer: FakeTrainer;
  let data: string;
  /** The seed the leader picked for JOB (its spec gives none). */
  let seed: number | undefined;
  const masters = new Map<string, RunningService>();

  function startMaster(id: string): RunningService {
    const master = startService('master', {
      NATS_URL: servers.nats.url,
      REDIS_URL: servers.redis.url,
      TRIBUTARY_ID: id,
      MASTER_KEY_PREFIX: 'failover',
      MASTER_LEASE_TTL_MS: String(LEASE_TTL_MS),
      MASTER_TICK_MS: '100',
      LOG_LEVEL: 'log',
    });
    masters.set(id, master);
    return master;
  }

  async function members(): Promise<Map<string, MemberStatus>> {
    const kv = await new Kvm(nc).open(KV_BUCKETS.members);
    const found = new Map<string, MemberStatus>();
    for await (const key of await kv.keys('master.*')) {
      const entry = await kv.get(key);
      if (entry?.operation === 'PUT') found.set(key, entry.json<MemberStatus>());
    }
    return found;
  }

  beforeAll(async () => {
    servers = await startTestServers();
    data = join(servers.dir, 'data');
    await writeDataset(data, 2, 32);
    nc = await connect({ servers: servers.nats.url });
    await ensureStreams(nc);
    log = new EventLog(nc);
    trainer = await FakeTrainer.connect(servers.nats.url, 'trainer-1');
    await trainer.register();
  });

  afterAll(async () => {
    for (const master of masters.values()) {
      if (master.child.exitCode === null && master.child.signalCode === null) master.child.kill('SIGKILL');
      await master.exited;
    }
    log?.stop();
    await trainer?.close();
    await nc?.close();
    await servers?.stop();
  });

  test('master failover - a second master stands by: it shows as standby and answers nothing', async () => {
    await startMaster('master-a').waitFor(/master master-a ready as leader/);
    const b = startMaster('master-b');
    await b.waitFor(/master master-b ready as standby/);
    expect(b.output()).toMatch(/master master-b standing by \(leader: \d+:master-a:[0-9a-f]+\)/);
    const states = await eventually('both masters in the members bucket', async () => {
      const found = await members();
      return found.size === 2 ? found : undefined;
    });
    expect(states.get('master.master-a')).toMatchObject({ state: 'leader', leader: true });
    expect(states.get('master.master-b')).toMatchObject({ state: 'standby', leader: false });

    await jetstream(nc).publish(
      SUBJECTS.submit,
      encodeJson(jobSpec(JOB, data, { stop: { maxEpochs: 3 }, training: { taskTimeout: { floorMs: 30_000 } } })),
    );
    seed = ((await log.waitFor(JOB, 'started')) as { seed?: number }).seed;
    expect(Number.isInteger(seed)).toBe(true);
    // Status requests share the `master` queue group: a subscribed standby would get some of
    // them and answer "unknown job" or not at all. Every one is answered by the leader.
    for (let i = 0; i < 20; i += 1) {
      const reply = await nc.request(SUBJECTS.status(JOB), encodeJson({}), { timeout: 2_000 });
      expect(decodeJsonObject(SUBJECTS.status(JOB), reply.data)).toMatchObject({ jobId: JOB, state: 'running' });
    }
    expect(b.output()).not.toMatch(/resumed job|records in \d+ chunks/);
  });

  test('master failover - the standby takes over from a SIGKILLed leader mid-job; every task is done exactly once per epoch', async () => {
    const a = masters.get('master-a')!;
    const b = masters.get('master-b')!;
    trainer.retryForMs = 60_000;
    // All of epoch 0 and three tasks of epoch 1, then one task held claimed across the failover.
    let counted = 0;
    await trainer.work(
      JOB,
      () => counted >= TASKS + 3,
      async () => {
        counted += 1;
        return true;
      },
    );
    const held = await eventually('a task to hold', () => trainer.pull(JOB).then((t) => t ?? undefined));
    expect((await trainer.claim(held)).ok).toBe(true);

    a.child.kill('SIGKILL');
    await a.exited;
    // Sent while no master leads: retried until the new leader answers, and counted once.
    expect(await trainer.report(held, 'done', { samples: 4 })).toEqual({ ok: true, counted: true });
    await b.waitFor(/master master-b is the leader/);
    expect(b.output()).toMatch(new RegExp(`resumed job ${JOB} at epoch 1 \\(3 done, \\d+ pending, \\d+ todo[;)]`));

    const pulled: { epoch: number; taskId: number }[] = [];
    await trainer.work(
      JOB,
      () => log.of(JOB, 'stopped').length > 0,
      async (task) => {
        pulled.push({ epoch: task.epoch, taskId: task.taskId });
        return true;
      },
    );
    expect((await log.waitFor(JOB, 'stopped')).reason).toBe('maxEpochs');
    const status = (await trainer.status(JOB)) as JobStatusReply;
    expect(status).toMatchObject({ state: 'stopped', epoch: 3, seed });
    // The new leader read the seed stored with the job: epoch 2, all its own, went out in the
    // same seeded order the first leader would have used.
    const epoch2 = pulled.filter((t) => t.epoch === 2).map((t) => t.taskId);
    expect(epoch2).toEqual(epochTaskOrder(TASKS, seed!, 2));
    const allOnce = Object.fromEntries(Array.from({ length: TASKS }, (_, i) => [String(i), 1]));
    expect(status.epochs.filter((e) => e.epoch < 3)).toEqual([
      { epoch: 0, done: TASKS, discarded: 0, doneCounts: allOnce },
      { epoch: 1, done: TASKS, discarded: 0, doneCounts: allOnce },
      { epoch: 2, done: TASKS, discarded: 0, doneCounts: allOnce },
    ]);
    expect(status.samples).toBe(3 * TASKS * 4);
    const states = await members();
    expect(states.get('master.master-b')).toMatchObject({ state: 'leader', leader: true });
    // The dead leader's entry is dropped rather than left to lapse, so one master says leader.
    expect(states.has('master.master-a')).toBe(false);
  });

  test('master failover - the killed master comes back as a standby of the new leader', async () => {
    const again = startMaster('master-a');
    await again.waitFor(/master master-a ready as standby/);
    expect(again.output()).toMatch(/master master-a standing by \(leader: \d+:master-b:[0-9a-f]+\)/);
    expect((await trainer.status(JOB)).state).toBe('stopped');
  });

  test('master failover - a leader stopped with SIGTERM hands over to the standby, which takes specs and stop messages', async () => {
    const a = masters.get('master-a')!;
    const b = masters.get('master-b')!;
    const js = jetstream(nc);
    b.child.kill('SIGTERM');
    expect(await b.exited).toEqual({ code: 0, signal: null });
    expect(b.output()).toMatch(/leaving office: shutting down/);
    // Published while the hand-over may still be under way: the new leader takes both.
    await js.publish(SUBJECTS.submit, encodeJson(jobSpec('after-handover', data, { stop: { maxEpochs: 5 } })));
    await a.waitFor(/master master-a is the leader/);
    await log.waitFor('after-handover', 'started');
    await js.publish(SUBJECTS.stop('after-handover'), encodeJson({ reason: 'manual', detail: 'test' }));
    expect(await log.waitFor('after-handover', 'stopped')).toMatchObject({ reason: 'manual', detail: 'test' });
    expect((await trainer.status('after-handover')).state).toBe('stopped');
  });
});

describe('master failover, local cluster', () => {
  let servers: TestServers;
  let cluster: LocalCluster;

  beforeAll(async () => {
    servers = await startTestServers();
    cluster = new LocalCluster({
      root: ROOT,
      stateDir: join(servers.dir, 'cluster'),
      natsUrl: servers.nats.url,
      redisUrl: servers.redis.url,
      trainers: 0,
      pservers: 0,
      masters: 2,
      evaluators: 0,
      restart: false,
      env: { MASTER_LEASE_TTL_MS: String(LEASE_TTL_MS) },
      say: () => undefined,
    });
    await cluster.start();
  });

  afterAll(async () => {
    await cluster?.stop();
    await servers?.stop();
  });

  test('master failover - `tributary up --masters 2` runs a leader and a standby, as `tributary ps` shows', async () => {
    const env = { NATS_URL: servers.nats.url, TRIBUTARY_STATE_DIR: join(servers.dir, 'cluster') };
    const rows = await eventually('both masters in ps', async () => {
      const ps = await runCli(['ps', '--json'], { env });
      const masterRows = (JSON.parse(ps.stdout) as { role: string; id: string; state: string }[]).filter(
        (r) => r.role === 'master',
      );
      return masterRows.length === 2 ? masterRows : undefined;
    });
    expect(rows.map((r) => r.id)).toEqual(['master-0', 'master-1']);
    expect(rows.map((r) => r.state).sort()).toEqual(['leader', 'standby']);
  });
});
