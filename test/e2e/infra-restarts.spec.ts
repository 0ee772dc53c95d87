import { cpSync, existsSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { LocalCluster } from '#libs/local-cluster';
import { MasterClient } from '#libs/master-client';
import { connectNats, type JobEvent, type NatsConnection } from '#libs/messaging';
import { waitUntil } from '../support/chaos-watch.js';
import { JobAccountingWatch } from '../support/job-accounting.js';
import { waitForEvent } from '../support/job-events.js';
import { restartServer } from '../support/server-restart.js';
import { testCluster } from '../support/test-cluster.js';
import { startTestServers, type TestServers } from '../support/servers.js';
import { READY_LINE, type RunningService, startService } from '../support/service-process.js';
import {
  scoreExportedModel,
  tinyJobSpec,
  writeTinyDataset,
  writeTinyEvalSet,
  type TinyDataset,
} from '../support/tiny-dataset.js';

const JOB_TIMEOUT_MS = 120_000;
/** Epochs each job runs; the restart happens after the first, so most of the job follows it. */
const EPOCHS = 6;

describe('infrastructure restarts, end to end', () => {
  let servers: TestServers;
  let cluster: LocalCluster;
  let nc: NatsConnection;
  let data: TinyDataset;
  const dataDir = () => join(servers.dir, 'data');
  /** The evaluator runs outside the cluster, so a test can kill it and start it again. */
  let evaluator: RunningService;
  const startEvaluator = () =>
    startService('evaluator', {
      NATS_URL: servers.nats.url,
      REDIS_URL: servers.redis.url,
      TRIBUTARY_BACKEND: 'wasm',
      TRIBUTARY_ID: 'evaluator-e2e',
      LOG_LEVEL: 'log',
    });
  const logsDir = () => join(servers.dir, 'cluster', 'logs');
  /**
   * `waiting`, failing with the evaluator's latest output added: it runs outside the cluster, so
   * its log is in no file, and a job that never ends is most often an evaluator that stopped.
   */
  async function withEvaluatorOutput<T>(waiting: Promise<T>): Promise<T> {
    try {
      return await waiting;
    } catch (err) {
      const exit = evaluator.child.exitCode ?? evaluator.child.signalCode;
      (err as Error).message +=
        `\nthe evaluator ${exit === null ? 'is running' : `exited (${exit})`}; its output ends:\n` +
        evaluator.output().slice(-4_000);
      throw err;
    }
  }

  beforeAll(async () => {
    servers = await startTestServers();
    data = await writeTinyDataset(dataDir(), { files: 2, chunksPerFile: 6 });
    // Shard leases outlast the longest Redis outage here (6 s, and up to 6.4 s more before the
    // clients' backoff reconnects them): this cluster restarts no pserver that lost its lease.
    cluster = testCluster(servers, { evaluators: 0, env: { PSERVER_LEASE_TTL_MS: '30000' } });
    await cluster.start();
    evaluator = startEvaluator();
    await evaluator.waitFor(READY_LINE, 60_000);
    nc = await connectNats(servers.nats.url, 'e2e-test');
  }, 120_000);

  afterAll(async () => {
    await nc?.close();
    evaluator?.child.kill('SIGTERM');
    await evaluator?.exited;
    await cluster?.stop();
    await servers?.stop();
  }, 120_000);

  /**
   * Submits a job that runs `EPOCHS` epochs, runs `disrupt` after its first epoch, and waits for
   * its export. The master's accounting of every epoch, the disrupted one included, is checked:
   * every task done exactly once and none discarded.
   */
  async function runJobThrough(jobId: string, disrupt: () => Promise<void>): Promise<JobEvent[]> {
    const output = join(servers.dir, `out-${jobId}`);
    const accounting = new JobAccountingWatch(nc, jobId);
    await new MasterClient(nc, 'e2e-test').submitJob(
      tinyJobSpec(jobId, data, output, { stop: { target: undefined, maxEpochs: EPOCHS, maxSeconds: 200 } }),
    );
    accounting.start();
    let events: JobEvent[];
    try {
      await withEvaluatorOutput(waitForEvent(nc, jobId, (e) => e.type === 'epoch' && e.epoch >= 1, JOB_TIMEOUT_MS));
      const disruptedAt = new Date().toISOString();
      await disrupt();
      events = await withEvaluatorOutput(
        waitForEvent(nc, jobId, (e) => e.type === 'model-exported' || e.type === 'failed', JOB_TIMEOUT_MS),
      );
      // The job kept going after the restart: epochs finished after it.
      expect(events.filter((e) => e.type === 'epoch' && e.at > disruptedAt).length).toBeGreaterThan(0);
    } finally {
      await accounting.stop();
    }
    expect(events.at(-1)?.type).toBe('model-exported');
    const stopped = events.find((e) => e.type === 'stopped') as Extract<JobEvent, { type: 'stopped' }>;
    expect(stopped.reason).toBe('maxEpochs');
    expect(JSON.parse(readFileSync(join(output, 'summary.json'), 'utf8'))).toMatchObject({
      jobId,
      stopReason: 'maxEpochs',
    });

    // Each epoch closed once: the job never went back to an epoch it had finished.
    expect(events.filter((e) => e.type === 'epoch').map((e) => e.epoch)).toEqual(
      Array.from({ length: EPOCHS }, (_, i) => i + 1),
    );
    accounting.addEpochEvents(events);
    expect(accounting.last?.status.state).toBe('stopped');
    expect(accounting.last?.status.epoch).toBe(EPOCHS);
    expect(accounting.accounting().map((e) => e.epoch)).toEqual(Array.from({ length: EPOCHS + 1 }, (_, i) => i));
    expect(accounting.problems()).toEqual([]);
    return events;
  }

  /** The cluster's service logs that contain `pattern`. */
  function logsMatching(pattern: RegExp): string[] {
    return readdirSync(logsDir())
      .filter((f) => pattern.test(readFileSync(join(logsDir(), f), 'utf8')))
      .sort();
  }

  test(
    'infrastructure restarts - NATS restarted mid-job: every service reconnects and the job completes',
    async () => {
      await runJobThrough('nats-restart', () => restartServer(servers, 'nats', { signal: 'SIGTERM', downMs: 5_000 }));
      const all = readdirSync(logsDir()).sort();
      expect(logsMatching(/NATS reconnected/)).toEqual(all);
      expect(evaluator.output()).toMatch(/NATS reconnected/);
    },
    JOB_TIMEOUT_MS * 2,
  );

  test(
    'infrastructure restarts - Redis killed (SIGKILL) and restarted mid-job: the master reconnects and the job completes',
    async () => {
      await runJobThrough('redis-restart', () => restartServer(servers, 'redis', { signal: 'SIGKILL', downMs: 2_000 }));
      expect(logsMatching(/Redis reconnected/)).toEqual(expect.arrayContaining(['master-0.log']));
    },
    JOB_TIMEOUT_MS * 2,
  );

  /**
   * Redis crashes and comes back from an older copy of its append-only file: without writes it
   * had answered, as a Redis that fsyncs once a second can. Restarted at once, the master keeps
   * its lease and finds the job's write count off; down longer than the lease, it takes office
   * again and finds its last term's writes missing. Either way it writes back the state it
   * answered, and no task already trained is dispatched again. The copy is put back once two
   * epochs have ended after it was taken (an epoch's event goes out after its write, so the
   * first may have been written before the copy; the second was not), so that writes were lost
   * and the job is still running: the test job runs all its epochs in about a second on a fast
   * machine, and a fixed wait outlasted it.
   */
  test.each([
    { path: 'restarted at once', jobId: 'redis-lost-writes', downMs: 0 },
    { path: 'down past the leader lease', jobId: 'redis-lost-term', downMs: 6_000 },
  ])(
    'infrastructure restarts - Redis comes back without writes it answered ($path): every task still counts once',
    async ({ jobId, downMs }) => {
      const aof = join(servers.dataDirs.redis, 'appendonlydir');
      const copy = join(servers.dir, `aof-${jobId}`);
      await runJobThrough(jobId, async () => {
        cpSync(aof, copy, { recursive: true });
        const copiedAt = new Date().toISOString();
        let endedSince = 0;
        await waitForEvent(
          nc,
          jobId,
          (e) => e.type === 'epoch' && e.at > copiedAt && ++endedSince === 2,
          JOB_TIMEOUT_MS,
        );
        await restartServer(servers, 'redis', {
          signal: 'SIGKILL',
          downMs,
          whileDown: () => {
            rmSync(aof, { recursive: true, force: true });
            cpSync(copy, aof, { recursive: true });
          },
        });
      });
      expect(logsMatching(/Redis lost writes it had answered/)).toEqual(['master-0.log']);
    },
    JOB_TIMEOUT_MS * 2,
  );

  test(
    'infrastructure restarts - NATS killed (SIGKILL) mid-job: the job completes',
    async () => {
      await runJobThrough('nats-kill', () => restartServer(servers, 'nats', { signal: 'SIGKILL', downMs: 1_000 }));
    },
    JOB_TIMEOUT_MS * 2,
  );

  test(
    'infrastructure restarts - evaluator killed mid-job: the restarted one resumes, stops the job at its target and exports the best model',
    async () => {
      const jobId = 'evaluator-kill';
      const output = join(servers.dir, `out-${jobId}`);
      // Every eval label names the wrong class until the evaluator is killed, so the job cannot
      // reach its target before the kill, however fast it learns.
      await writeTinyEvalSet(dataDir(), { mislabelled: true });
      const accounting = new JobAccountingWatch(nc, jobId);
      // No epoch budget to speak of: the tiny job can run through 30 epochs while the evaluator
      // is down and starting again, and the master would then end it before the target is seen.
      await new MasterClient(nc, 'e2e-test').submitJob(
        tinyJobSpec(jobId, data, output, {
          evaluation: { everySteps: 1 },
          stop: { target: 0.9, maxSeconds: 200, maxEpochs: 100_000 },
        }),
      );
      accounting.start();
      let events: JobEvent[];
      let bestBefore: number;
      let killedAt: string;
      try {
        const first = await withEvaluatorOutput(waitForEvent(nc, jobId, (e) => e.type === 'metrics', JOB_TIMEOUT_MS));
        bestBefore = (first.at(-1) as Extract<JobEvent, { type: 'metrics' }>).best;
        expect(bestBefore).toBeLessThan(0.9);
        // What it learnt is on disk before it is killed.
        const state = join(output, 'best', 'state.json');
        await waitUntil('the best checkpoint on disk', () => existsSync(state) || undefined, 60_000);
        evaluator.child.kill('SIGKILL');
        await evaluator.exited;
        killedAt = new Date().toISOString();
        await writeTinyEvalSet(dataDir());
        evaluator = startEvaluator();
        await evaluator.waitFor(/resumed from the best checkpoint/, 60_000);

        events = await withEvaluatorOutput(
          waitForEvent(nc, jobId, (e) => e.type === 'model-exported' || e.type === 'failed', JOB_TIMEOUT_MS),
        );
      } finally {
        await accounting.stop();
      }
      expect(events.at(-1)?.type).toBe('model-exported');
      const stopped = events.find((e) => e.type === 'stopped') as Extract<JobEvent, { type: 'stopped' }>;
      expect(stopped.reason).toBe('target');
      expect(stopped.at > killedAt).toBe(true);
      const summary = JSON.parse(readFileSync(join(output, 'summary.json'), 'utf8'));
      expect(summary).toMatchObject({ jobId, stopReason: 'target' });
      expect(summary.bestValue).toBeGreaterThanOrEqual(Math.max(0.9, bestBefore));
      // The exported model is the best one: it scores the target on the (correct) eval set.
      expect(await scoreExportedModel(output, data)).toBeGreaterThanOrEqual(0.9 - 2 / 256);
      accounting.addEpochEvents(events);
      expect(accounting.problems()).toEqual([]);
    },
    JOB_TIMEOUT_MS * 2,
  );
});
