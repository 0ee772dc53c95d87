import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Kvm, type KV } from '@nats-io/kv';
import { LocalCluster, freePort } from '#libs/local-cluster';
import { MasterClient } from '#libs/master-client';
import { KV_BUCKETS, connectNats, type JobEvent, type NatsConnection } from '#libs/messaging';
import { CHAOS_DATASET, writeChaosDataset, chaosJobSpec } from '../support/chaos-job.js';
import { CHAOS_TARGETS, ChaosMonkey } from '../support/chaos-monkey.js';
import { JobEventTap, ShardVersionWatch } from '../support/chaos-watch.js';
import { JobAccountingWatch } from '../support/job-accounting.js';
import { waitBudget, waitForEvent } from '../support/job-events.js';
import { ROOT } from '../support/service-process.js';
import { scoreExportedModel } from '../support/tiny-dataset.js';
import { TEST_PATH_ROOTS } from '../support/test-cluster.js';

const JOB_ID = 'chaos-job';
const PSERVERS = 2;
/** Accuracy the job must reach, well after the kills are over. */
const TARGET_ACCURACY = 0.9;
/**
 * The job's own budget: stopping on it (reason maxSeconds) fails the test. The job needs about
 * 3,800 steps: 80 s on an idle 2-core machine, over 200 s on one that runs other work too, so
 * the budget bounds a wedged job without failing a slow one.
 */
const JOB_MAX_SECONDS = 360;
/** Versions trained before the first kill, so every service is busy when it starts. */
const WARM_UP_VERSIONS = 20;
const TEST_TIMEOUT_MS = 450_000;

describe('chaos, end to end', () => {
  let dir: string;
  let cluster: LocalCluster;
  let nc: NatsConnection;
  let members: KV;
  let pserversKv: KV;
  const lines: string[] = [];
  let passed = false;
  const say = (line: string) => lines.push(`${new Date().toISOString()} ${line}`);

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tributary-chaos-'));
    const natsUrl = `nats://127.0.0.1:${await freePort()}`;
    // The cluster starts its own NATS and Redis, so the test can kill and restart NATS.
    cluster = new LocalCluster({
      root: ROOT,
      stateDir: join(dir, 'cluster'),
      natsUrl,
      redisUrl: `redis://127.0.0.1:${await freePort()}`,
      trainers: 2,
      pservers: PSERVERS,
      masters: 2,
      evaluators: 1,
      restart: false,
      env: { TRIBUTARY_BACKEND: 'wasm', LOG_LEVEL: 'log', ...TEST_PATH_ROOTS },
      say,
    });
    await cluster.start();
    nc = await connectNats(natsUrl, 'chaos-test');
    const kvm = new Kvm(nc);
    members = await kvm.open(KV_BUCKETS.members);
    pserversKv = await kvm.open(KV_BUCKETS.pservers);
  }, 120_000);

  afterAll(async () => {
    await nc?.close().catch(() => undefined);
    await cluster?.stop();
    // On a failure the logs stay for a look: `<dir>/cluster/logs/<service>.log`.
    if (!passed || process.env['KEEP_CHAOS_DIR']) console.log(`chaos state kept in ${dir}\n${lines.join('\n')}`);
    else rmSync(dir, { recursive: true, force: true });
  }, 120_000);

  test(
    'chaos - a job survives kill -9 of a trainer, a pserver, the leading master and the evaluator, and a NATS restart: its exported model scores the target, every task done once per epoch and none discarded, shard versions only go up',
    async () => {
      const timeLeft = waitBudget(TEST_TIMEOUT_MS);
      const data = await writeChaosDataset(join(dir, 'data'));
      const output = join(dir, 'out');
      const events = new JobEventTap(nc, JOB_ID);
      const versions = new ShardVersionWatch(pserversKv, JOB_ID, PSERVERS);
      const accounting = new JobAccountingWatch(nc, JOB_ID);
      const monkey = new ChaosMonkey({ cluster, members, versions, accounting, events, say });
      try {
        await new MasterClient(nc, 'chaos-test').submitJob(
          chaosJobSpec(JOB_ID, data, output, { target: TARGET_ACCURACY, maxSeconds: JOB_MAX_SECONDS }),
        );
        versions.start();
        accounting.start();
        await versions.waitAbove(WARM_UP_VERSIONS, 60_000, () => events.ended());

        for (const target of CHAOS_TARGETS) await monkey.strike(target);
        // Every kill happened while the job trained (a kill after its end would prove nothing).
        expect(events.ended()).toBeUndefined();

        const all = await waitForEvent(
          nc,
          JOB_ID,
          (e) => e.type === 'model-exported' || e.type === 'failed',
          timeLeft(),
        );
        expect(all.at(-1)?.type).toBe('model-exported');
        const stopped = all.find((e) => e.type === 'stopped') as Extract<JobEvent, { type: 'stopped' }> | undefined;
        expect(stopped?.reason).toBe('target');
        const summary = JSON.parse(readFileSync(join(output, 'summary.json'), 'utf8'));
        expect(summary).toMatchObject({ jobId: JOB_ID, stopReason: 'target' });
        expect(summary.bestValue).toBeGreaterThanOrEqual(TARGET_ACCURACY);
        // The exported model itself scores what the evaluator said it did on the same eval set
        // (within two examples: this process predicts on another TF.js backend).
        const slack = 2 / CHAOS_DATASET.evalRecords;
        const score = await scoreExportedModel(output, data);
        expect(Math.abs(score - summary.bestValue)).toBeLessThanOrEqual(slack);
        expect(score).toBeGreaterThanOrEqual(TARGET_ACCURACY - slack);
        accounting.addEpochEvents(all);
      } finally {
        await versions.stop();
        await accounting.stop();
        events.stop();
        say(`recoveries: ${JSON.stringify(monkey.recoveries)}`);
      }

      expect(monkey.recoveries.map((r) => r.target)).toEqual([...CHAOS_TARGETS]);
      expect(monkey.recoveries.find((r) => r.target === 'master')?.takeover).toBeDefined();
      expect(versions.samples).toBeGreaterThan(0);
      expect(versions.decreases()).toEqual([]);
      expect(accounting.accounting().length).toBeGreaterThan(1);
      expect(accounting.problems()).toEqual([]);
      passed = true;
    },
    TEST_TIMEOUT_MS,
  );
});
