import { join } from 'node:path';
import type { Subscription } from '@nats-io/transport-node';
import type { LocalCluster } from '#libs/local-cluster';
import { MasterClient } from '#libs/master-client';
import {
  SUBJECTS,
  connectNats,
  decodeJsonObject,
  type JobEvent,
  type NatsConnection,
  type TaskClaim,
} from '#libs/messaging';
import { JobAccountingWatch } from '../support/job-accounting.js';
import { waitForEvent } from '../support/job-events.js';
import { testCluster } from '../support/test-cluster.js';
import { startTestServers, type TestServers } from '../support/servers.js';
import { READY_LINE, type RunningService, startService } from '../support/service-process.js';
import { tinyJobSpec, writeTinyDataset, type TinyDataset } from '../support/tiny-dataset.js';

/*
 * One tiny job per training mode, each through an elastic change: real service processes
 * (master, two pservers, the evaluator through `LocalCluster`; trainers with `startService`),
 * a real nats-server and redis-server. Two trainers start each job, a third is started once the
 * first task is claimed and joins, and once that one has a task the oldest is sent SIGTERM (it hands its task back
 * and leaves). The job is stopped by hand once the epoch of the change is complete. Each must have trained (the
 * evaluation loss fell), and counted every task exactly once per epoch. The jobs run one after
 * another on the same cluster; the trainers go from one job to the next by themselves.
 */

const TEST_TIMEOUT_MS = 90_000;
const JOB_TIMEOUT_MS = 60_000;

const MODES: { name: string; training: Record<string, unknown>; trainers?: Record<string, number> }[] = [
  { name: 'sync-backup', training: { mode: 'sync', backupTrainers: 1 }, trainers: { min: 2, max: 8 } },
  { name: 'async-staleness', training: { mode: 'async', stalenessAware: true, overlapPushes: true } },
  { name: 'ssp', training: { mode: 'ssp', maxStaleness: 2 } },
  { name: 'local', training: { mode: 'local', localSteps: 4, localSync: true } },
  { name: 'local-overlapped', training: { mode: 'local', localSteps: 4, localSync: true, overlapRounds: true } },
  { name: 'local-first', training: { mode: 'local', localSteps: 4, localSync: true, roundEnd: 'first' } },
  { name: 'local-elastic', training: { mode: 'local', localSteps: 4, localSync: false, elasticAlpha: 0.25 } },
];

describe('training modes, end to end', () => {
  let servers: TestServers;
  let cluster: LocalCluster;
  let nc: NatsConnection;
  let data: TinyDataset;
  let claims: TaskClaim[];
  let tap: Subscription;
  /** The trainers running, oldest first. */
  const trainers: { id: string; service: RunningService }[] = [];
  let started = 0;

  beforeAll(async () => {
    servers = await startTestServers();
    // 2 files x 4 chunks x 32 records: 8 tasks an epoch (one chunk each) of 8 minibatches.
    data = await writeTinyDataset(join(servers.dir, 'data'), { files: 2, chunksPerFile: 4, recordsPerChunk: 32 });
    cluster = testCluster(servers, { trainers: 0 });
    await cluster.start();
    nc = await connectNats(servers.nats.url, 'modes-test');
    claims = [];
    tap = nc.subscribe(SUBJECTS.allTaskClaims, {
      callback: (_e, m) => {
        claims.push(decodeJsonObject(m.subject, m.data) as unknown as TaskClaim);
      },
    });
    await Promise.all([startTrainer(), startTrainer()].map((t) => t.service.waitFor(READY_LINE, 60_000)));
  }, 120_000);

  afterAll(async () => {
    tap?.unsubscribe();
    await Promise.all(
      trainers.splice(0).map(async ({ service }) => {
        if (service.child.exitCode !== null || service.child.signalCode !== null) return;
        service.child.kill('SIGTERM');
        await service.exited;
      }),
    );
    await nc?.close();
    await cluster?.stop();
    await servers?.stop();
  }, 120_000);

  function startTrainer(): { id: string; service: RunningService } {
    started += 1;
    const id = `tm-${started}`;
    const service = startService('trainer', {
      NATS_URL: servers.nats.url,
      REDIS_URL: servers.redis.url,
      TRIBUTARY_ID: id,
      TRIBUTARY_BACKEND: 'wasm',
      LOG_LEVEL: 'log',
    });
    trainers.push({ id, service });
    return { id, service };
  }

  /** Polls until `check` holds (the test's own timeout bounds it; no timing assertion). */
  async function eventually<T>(check: () => Promise<T | undefined | false> | T | undefined | false): Promise<T> {
    for (;;) {
      const value = await check();
      if (value !== undefined && value !== false) return value;
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  const claimOf = (jobId: string, trainerId: string) =>
    claims.find((c) => c.jobId === jobId && c.trainerId === trainerId);

  test.each(MODES)(
    'training modes - $name trains through a trainer joining and one leaving, each task counted once per epoch',
    async ({ name, training, trainers: quorum }) => {
      const jobId = `mode-${name}`;
      const master = new MasterClient(nc, 'modes-test');
      const accounting = new JobAccountingWatch(nc, jobId);
      const spec = tinyJobSpec(jobId, data, join(servers.dir, `out-${jobId}`), {
        optimizer: { type: 'sgd', learningRate: 0.1 },
        training: {
          batchSize: 4,
          chunksPerTask: 1,
          taskTimeout: { floorMs: 5000, multiplier: 3 },
          seed: 1,
          ...training,
        },
        trainers: quorum ?? { min: 1, max: 8 },
        evaluation: { everySteps: 5, metric: 'accuracy' },
        stop: { target: undefined, maxEpochs: 1_000, maxSeconds: 80 },
      });
      const [oldest] = trainers;
      // With roundEnd first, the parameter servers tell the trainers of each round's first delta.
      let roundNotices = 0;
      const rounds = nc.subscribe(SUBJECTS.rounds(jobId), {
        callback: () => {
          roundNotices += 1;
        },
      });
      await master.submitJob(spec);
      accounting.start();
      // Training is under way when the newcomer's process starts.
      await eventually(() => claimOf(jobId, oldest!.id));
      const joining = startTrainer();
      await eventually(() => claimOf(jobId, joining.id));
      const leaving = trainers.shift()!;
      leaving.service.child.kill('SIGTERM');
      await expect(leaving.service.exited).resolves.toEqual({ code: 0, signal: null });
      expect(joining.service.output()).toMatch(new RegExp(`job ${jobId}: parameters initialised; training`));

      const changedAt = (await master.jobStatus(jobId)).epoch;
      await eventually(async () => (await master.jobStatus(jobId)).epoch >= changedAt + 1);
      // Two evaluations at least, so that the loss can be seen to fall: a fast job may finish its
      // epoch before the evaluator, which yields the cores to trainers, scored it twice.
      let evaluations = 0;
      await waitForEvent(nc, jobId, (e) => e.type === 'metrics' && ++evaluations >= 2, JOB_TIMEOUT_MS);
      await master.stopJob(jobId);
      const events = await waitForEvent(nc, jobId, (e) => e.type === 'stopped' || e.type === 'failed', JOB_TIMEOUT_MS);
      await accounting.stop();
      rounds.unsubscribe();
      expect(events.at(-1)).toMatchObject({ type: 'stopped', reason: 'manual' });
      if (training['roundEnd'] === 'first') expect(roundNotices).toBeGreaterThan(0);
      else expect(roundNotices).toBe(0);

      accounting.addEpochEvents(events);
      expect(accounting.problems()).toEqual([]);
      const losses = events.flatMap((e: JobEvent) => (e.type === 'metrics' ? [e.metrics.loss] : []));
      expect(losses.length).toBeGreaterThan(1);
      // The first evaluation may come after much of the learning on a busy machine, so the test
      // asks for a lower loss later, not for a fixed share of the first.
      expect(Math.min(...losses.slice(1))).toBeLessThan(losses[0]!);
    },
    TEST_TIMEOUT_MS,
  );
});
