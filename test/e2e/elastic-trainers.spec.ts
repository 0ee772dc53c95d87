import { join } from 'node:path';
import { Kvm, type KV } from '@nats-io/kv';
import type { Subscription } from '@nats-io/transport-node';
import { LocalCluster } from '#libs/local-cluster';
import { MasterClient } from '#libs/master-client';
import {
  KV_BUCKETS,
  SUBJECTS,
  connectNats,
  decodeJsonObject,
  type JobEvent,
  type JobStatusReply,
  type MemberStatus,
  type NatsConnection,
  type TaskClaim,
  type TaskReport,
} from '#libs/messaging';
import { waitForEvent } from '../support/job-events.js';
import { testCluster } from '../support/test-cluster.js';
import { startTestServers, type TestServers } from '../support/servers.js';
import { READY_LINE, type RunningService, startService } from '../support/service-process.js';
import { tinyJobSpec, writeTinyDataset, type TinyDataset } from '../support/tiny-dataset.js';

/*
 * Trainers come and go while a job trains: real service processes (master, two pservers, the
 * evaluator through `LocalCluster`; trainers one by one with `startService`, so each can be
 * started late, sent SIGTERM or SIGKILL), a real nats-server and redis-server, default
 * settings. Jobs stop on `stop.maxEpochs` (or by hand between epochs), so the master's
 * accounting can be checked task by task over whole epochs. Claims and reports are watched
 * with plain NATS subscriptions on their subjects.
 */

const TEST_TIMEOUT_MS = 150_000;
const JOB_TIMEOUT_MS = 120_000;
/** Epochs a job runs (it stops on `stop.maxEpochs`). */
const EPOCHS = 2;

describe('elastic trainers, end to end', () => {
  let servers: TestServers;
  let cluster: LocalCluster;
  let nc: NatsConnection;
  let members: KV;
  let data: TinyDataset;
  let claims: TaskClaim[];
  let reports: TaskReport[];
  let taps: Subscription[];
  const trainers: RunningService[] = [];
  /** Jobs submitted by the test under way: one a failed test left running is stopped after it. */
  const submitted: string[] = [];

  beforeAll(async () => {
    servers = await startTestServers();
    // 4 files x 8 chunks x 32 records: 8 tasks an epoch (four chunks each) of 32 minibatches.
    data = await writeTinyDataset(join(servers.dir, 'data'), { files: 4, chunksPerFile: 8, recordsPerChunk: 32 });
    cluster = testCluster(servers, { trainers: 0 });
    await cluster.start();
    nc = await connectNats(servers.nats.url, 'elastic-test');
    members = await new Kvm(nc).create(KV_BUCKETS.members, { history: 1 });
    // Plain subscriptions see every claim and report the trainers send to the master.
    claims = [];
    reports = [];
    taps = [
      nc.subscribe(SUBJECTS.allTaskClaims, {
        callback: (_e, m) => {
          claims.push(decodeJsonObject(m.subject, m.data) as unknown as TaskClaim);
        },
      }),
      nc.subscribe(SUBJECTS.allTaskReports, {
        callback: (_e, m) => {
          reports.push(decodeJsonObject(m.subject, m.data) as unknown as TaskReport);
        },
      }),
    ];
  }, 120_000);

  afterEach(async () => {
    const master = new MasterClient(nc, 'elastic-test');
    for (const jobId of submitted.splice(0)) {
      const { state } = await master.jobStatus(jobId);
      if (state === 'running' || state === 'waiting') await master.stopJob(jobId);
    }
    await Promise.all(trainers.splice(0).map(stopTrainer));
  }, 60_000);

  afterAll(async () => {
    for (const t of taps ?? []) t.unsubscribe();
    await nc?.close();
    await cluster?.stop();
    await servers?.stop();
  }, 120_000);

  function startTrainer(id: string): RunningService {
    const trainer = startService('trainer', {
      NATS_URL: servers.nats.url,
      REDIS_URL: servers.redis.url,
      TRIBUTARY_ID: id,
      TRIBUTARY_BACKEND: 'wasm',
      LOG_LEVEL: 'log',
    });
    trainers.push(trainer);
    return trainer;
  }

  async function stopTrainer(trainer: RunningService): Promise<void> {
    if (trainer.child.exitCode !== null || trainer.child.signalCode !== null) return;
    trainer.child.kill('SIGTERM');
    await trainer.exited;
  }

  async function submit(id: string, overrides: Record<string, unknown> = {}, maxEpochs = EPOCHS): Promise<void> {
    const spec = tinyJobSpec(id, data, join(servers.dir, `out-${id}`), {
      training: {
        mode: 'sync',
        batchSize: 4,
        chunksPerTask: 4,
        taskTimeout: { floorMs: 5000, multiplier: 3 },
        seed: 1,
      },
      evaluation: { everySteps: 100, metric: 'accuracy' },
      stop: { target: undefined, maxEpochs, maxSeconds: 110 },
      ...overrides,
    });
    await new MasterClient(nc, 'elastic-test').submitJob(spec);
    submitted.push(id);
  }

  async function member(id: string): Promise<MemberStatus | undefined> {
    const entry = await members.get(`trainer.${id}`);
    return entry && entry.operation === 'PUT'
      ? (decodeJsonObject('member', entry.value) as unknown as MemberStatus)
      : undefined;
  }

  /** Polls until `check` holds (the test's own timeout bounds it; no timing assertion). */
  async function eventually<T>(check: () => Promise<T | undefined | false> | T | undefined | false): Promise<T> {
    for (;;) {
      const value = await check();
      if (value !== undefined && value !== false) return value;
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** The next claim `trainerId` sends for `jobId` from now on. */
  function nextClaim(jobId: string, trainerId: string): Promise<TaskClaim> {
    const from = claims.length;
    return eventually(() => claims.slice(from).find((c) => c.jobId === jobId && c.trainerId === trainerId));
  }

  /**
   * The tasks `trainerId` claimed in `jobId` and did not report done, in the order it first
   * claimed them (a renewal repeats a claim): the task it works on, and the next one when it
   * claimed that ahead.
   */
  function heldBy(jobId: string, trainerId: string): TaskClaim[] {
    const held = new Map<string, TaskClaim>();
    for (const c of claims) {
      if (c.jobId !== jobId || c.trainerId !== trainerId || held.has(c.dispatchId)) continue;
      if (reported(c)?.outcome !== 'done') held.set(c.dispatchId, c);
    }
    return [...held.values()];
  }

  /** Whether the trainer `trainerId` reported `claim`'s task done at some time in that epoch. */
  function didTask(jobId: string, trainerId: string, claim: Pick<TaskClaim, 'taskId' | 'epoch'>): boolean {
    return reports.some(
      (r) =>
        r.jobId === jobId &&
        r.trainerId === trainerId &&
        r.outcome === 'done' &&
        r.taskId === claim.taskId &&
        r.epoch === claim.epoch,
    );
  }

  /** Whether `trainerId` reported the dispatch `claim` names. */
  function reported(claim: TaskClaim, trainerId = claim.trainerId): TaskReport | undefined {
    return reports.find(
      (r) => r.jobId === claim.jobId && r.dispatchId === claim.dispatchId && r.trainerId === trainerId,
    );
  }

  /**
   * Waits for the job to stop, then checks the master's accounting: every task done exactly
   * once in each epoch it kept, and every epoch before the last complete (on `maxEpochs`, the
   * last one too).
   */
  async function expectCompletes(
    jobId: string,
    reason: 'maxEpochs' | 'manual' = 'maxEpochs',
  ): Promise<{ events: JobEvent[]; status: JobStatusReply }> {
    const events = await waitForEvent(nc, jobId, (e) => e.type === 'stopped' || e.type === 'failed', JOB_TIMEOUT_MS);
    expect(events.at(-1)).toMatchObject({ type: 'stopped', reason });
    const status = await new MasterClient(nc, 'elastic-test').jobStatus(jobId);
    expect(status.state).toBe('stopped');
    const epochEvents = events.filter((e) => e.type === 'epoch').length;
    expect(epochEvents).toBeGreaterThan(0);
    for (const e of status.epochs) {
      expect(e.discarded).toBe(0);
      for (const count of Object.values(e.doneCounts)) expect(count).toBe(1);
      // Stopped on maxEpochs the counter may stand at the epoch after the last one, empty.
      const complete = reason === 'maxEpochs' ? e.epoch < EPOCHS : e.epoch < status.epoch;
      if (complete) expect(Object.keys(e.doneCounts)).toHaveLength(status.tasks.total);
    }
    if (reason === 'maxEpochs') {
      const counted = status.epochs.filter((e) => e.epoch < EPOCHS).map((e) => e.epoch);
      expect(counted).toEqual(Array.from({ length: EPOCHS }, (_, i) => i));
    }
    return { events, status };
  }

  test(
    'elastic trainers - the job waits for trainers.min and never admits more than trainers.max',
    async () => {
      const jobId = 'elastic-min-max';
      const first = startTrainer('et-first');
      await first.waitFor(READY_LINE, 60_000);
      await submit(jobId, { trainers: { min: 2, max: 2 } });

      // One trainer of the two needed: the job waits, and its status says so.
      await waitForEvent(nc, jobId, (e) => e.type === 'waiting', 30_000);
      const master = new MasterClient(nc, 'elastic-test');
      await eventually(async () => (await master.jobStatus(jobId)).state === 'waiting');
      expect(claims.some((c) => c.jobId === jobId)).toBe(false);

      const second = startTrainer('et-second');
      const third = startTrainer('et-third');
      await Promise.all([second.waitFor(READY_LINE, 60_000), third.waitFor(READY_LINE, 60_000)]);
      await eventually(async () => (await master.jobStatus(jobId)).state === 'running');

      // Three trainers, two admitted at a time: one of them is turned away and waits.
      const turnedAway = await eventually(() =>
        trainers.find((t) => /trainers\.max \(2\) trainers at work; waiting/.test(t.output())),
      );
      expect(turnedAway).toBeDefined();
      await expectCompletes(jobId);
    },
    TEST_TIMEOUT_MS,
  );

  test(
    'elastic trainers - a trainer started mid-job pulls the current parameters, joins and trains',
    async () => {
      const jobId = 'elastic-join';
      const master = new MasterClient(nc, 'elastic-test');
      const early = startTrainer('et-early');
      await early.waitFor(READY_LINE, 60_000);
      // Long enough for any machine: stopped by hand below.
      await submit(jobId, {}, 1_000);
      await nextClaim(jobId, 'et-early');

      const late = startTrainer('et-late');
      // It finds the parameters initialised (no second initialisation) and is given tasks.
      await late.waitFor(new RegExp(`job ${jobId}: parameters initialised; training`), 60_000);
      const claim = await nextClaim(jobId, 'et-late');
      const status = await eventually(async () => {
        const m = await member('et-late');
        return m?.jobId === jobId && m.taskId !== undefined && m;
      });
      expect(status).toMatchObject({ role: 'trainer', state: 'training', backend: expect.any(String) });
      expect(late.output()).not.toMatch(/initialised by this trainer/);

      // Both train through a whole epoch after the late one's first claim; then the job is stopped.
      await eventually(async () => (await master.jobStatus(jobId)).epoch >= claim.epoch + 2);
      await master.stopJob(jobId);
      const { events } = await expectCompletes(jobId, 'manual');
      const lateDone = reports.filter((r) => r.jobId === jobId && r.trainerId === 'et-late' && r.outcome === 'done');
      expect(lateDone.some((r) => r.epoch === claim.epoch + 1)).toBe(true);
      expect(events.filter((e) => e.type === 'task-retried')).toEqual([]);
    },
    TEST_TIMEOUT_MS,
  );

  test(
    'elastic trainers - a trainer sent SIGTERM mid-task hands the task back and exits 0',
    async () => {
      const jobId = 'elastic-sigterm';
      const stays = startTrainer('et-stays');
      const leaves = startTrainer('et-leaves');
      await Promise.all([stays.waitFor(READY_LINE, 60_000), leaves.waitFor(READY_LINE, 60_000)]);
      // Minibatches of one: 128 of them a task, each a synchronous step, so that the task is still
      // under way 200 ms after its claim (one of 32 minibatches of 4 could end within them).
      await submit(jobId, {
        training: {
          mode: 'sync',
          batchSize: 1,
          chunksPerTask: 4,
          taskTimeout: { floorMs: 5000, multiplier: 3 },
          seed: 1,
        },
      });

      // Preempted while it works on a task.
      await nextClaim(jobId, 'et-leaves');
      await new Promise((r) => setTimeout(r, 200));
      leaves.child.kill('SIGTERM');
      await expect(leaves.exited).resolves.toEqual({ code: 0, signal: null });

      const held = heldBy(jobId, 'et-leaves');
      expect(held.length).toBeGreaterThanOrEqual(1);
      expect(held.length).toBeLessThanOrEqual(2);
      expect(leaves.output()).toMatch(/preempted after \d+ samples; handing it back/);
      for (const h of held) {
        expect(reported(h)).toMatchObject({ outcome: 'returned', taskId: h.taskId, epoch: h.epoch });
      }
      // Beside the tasks it held, the one report that may come back is a task message its pull
      // ahead took after the signal: handed back at once, never claimed.
      const returned = reports.filter((r) => r.jobId === jobId && r.outcome === 'returned');
      const unclaimed = returned.filter((r) => !held.some((h) => h.dispatchId === r.dispatchId));
      expect(returned.every((r) => r.trainerId === 'et-leaves')).toBe(true);
      expect(unclaimed.length).toBeLessThanOrEqual(1);
      for (const r of unclaimed) expect(claims.some((c) => c.dispatchId === r.dispatchId)).toBe(false);
      // Gone from the members bucket at once (not after its TTL).
      expect(await member('et-leaves')).toBeUndefined();

      const { events } = await expectCompletes(jobId);
      // Handed back, each task was re-queued with no failure counted and no timeout waited for,
      // and the trainer that stayed did it.
      expect(events.filter((e) => e.type === 'task-retried')).toEqual([]);
      for (const r of returned) expect(didTask(jobId, 'et-stays', r)).toBe(true);
    },
    TEST_TIMEOUT_MS,
  );

  test(
    'elastic trainers - a trainer killed mid-task: its task times out and is re-queued, the job completes',
    async () => {
      const jobId = 'elastic-sigkill';
      const survivor = startTrainer('et-survivor');
      const victim = startTrainer('et-victim');
      await Promise.all([survivor.waitFor(READY_LINE, 60_000), victim.waitFor(READY_LINE, 60_000)]);
      await submit(jobId);

      await nextClaim(jobId, 'et-victim');
      await new Promise((r) => setTimeout(r, 200));
      victim.child.kill('SIGKILL');
      await expect(victim.exited).resolves.toEqual({ code: null, signal: 'SIGKILL' });
      // What the victim held, in the order it claimed them; it reported none of them.
      const held = heldBy(jobId, 'et-victim');
      for (const h of held) expect(reported(h)).toBeUndefined();
      expect(held.length).toBeGreaterThanOrEqual(1);
      expect(held.length).toBeLessThanOrEqual(2);

      // The job completes, so the dead trainer's membership lapsed: a synchronous step waits for
      // every member's push.
      const { events } = await expectCompletes(jobId);
      // The task the victim worked on timed out (it never reported it) with one failure; a task
      // it had claimed ahead went back with none. The survivor did them.
      const timedOut = events.filter((e) => e.type === 'task-retried' && e.error === 'timeout');
      expect(timedOut).toEqual([
        expect.objectContaining({ taskId: held[0]!.taskId, epoch: held[0]!.epoch, failures: 1 }),
      ]);
      for (const h of held) expect(didTask(jobId, 'et-survivor', h)).toBe(true);
      // The survivor's own tasks were renewed while it waited for the dead trainer's pushes.
      expect(survivor.output()).not.toMatch(/no longer ours/);
    },
    TEST_TIMEOUT_MS,
  );
});
