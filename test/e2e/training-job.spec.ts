import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { allowedCpus, formatCpuList } from '#libs/config';
import { trainerCores, type LocalCluster } from '#libs/local-cluster';
import { loadLayersModelFromDir } from '#libs/learner';
import { MasterClient } from '#libs/master-client';
import {
  connectNats,
  encodeJson,
  SUBJECTS,
  type JobEvent,
  type JobListEntry,
  type NatsConnection,
} from '#libs/messaging';
import { waitUntil } from '../support/chaos-watch.js';
import { runCli } from '../support/cli-run.js';
import { jsonLines } from '../support/json-lines.js';
import { JobAccountingWatch } from '../support/job-accounting.js';
import { waitForEvent } from '../support/job-events.js';
import { testCluster } from '../support/test-cluster.js';
import { startTestServers, type TestServers } from '../support/servers.js';
import { tinyJobSpec, TINY_FEATURES, writeTinyDataset, type TinyDataset } from '../support/tiny-dataset.js';

const JOB_TIMEOUT_MS = 300_000;

describe('training job, end to end', () => {
  let servers: TestServers;
  let cluster: LocalCluster;
  let nc: NatsConnection;
  let data: TinyDataset;

  beforeAll(async () => {
    servers = await startTestServers();
    data = await writeTinyDataset(join(servers.dir, 'data'));
    cluster = testCluster(servers);
    await cluster.start();
    nc = await connectNats(servers.nats.url, 'e2e-test');
  }, 120_000);

  afterAll(async () => {
    await nc?.close();
    await cluster?.stop();
    await servers?.stop();
  }, 120_000);

  test('training job - each trainer runs on a core of its own where the machine has one for each', () => {
    const pinning = trainerCores('auto', 2);
    const trainers = cluster.list().filter((s) => s.role === 'trainer');
    expect(trainers.map((t) => t.core)).toEqual(pinning.cores);
    for (const trainer of trainers) {
      if (trainer.core === undefined) continue;
      const allowed = (thread: string | number) => allowedCpus(`/proc/${trainer.pid}/task/${thread}/status`);
      // Its main thread is held to that core (and so are the threads it starts, the learner's);
      // V8's own threads, started with the process, are free to run elsewhere.
      expect(allowed(trainer.pid!)).toEqual([trainer.core]);
      const threads = readdirSync(`/proc/${trainer.pid}/task`);
      const free = threads.filter((thread) => JSON.stringify(allowed(thread)) !== JSON.stringify([trainer.core]));
      expect(free.length).toBeGreaterThan(0);
      expect(readFileSync(`/proc/${trainer.pid}/cmdline`, 'utf8')).toContain('services/trainer/main.js');
    }
  });

  test(
    'training job - a bad spec is refused naming the field, and the next good one (one plain NATS publish) trains to its target',
    async () => {
      const bad = tinyJobSpec('bad-job', data, join(servers.dir, 'out-bad'), {
        optimizer: { type: 'adam', learningRate: -1 },
      });
      nc.publish(SUBJECTS.submit, encodeJson(bad));
      const refused = await waitForEvent(nc, 'bad-job', (e) => e.type === 'failed', 30_000);
      const failed = refused.at(-1) as Extract<JobEvent, { type: 'failed' }>;
      expect(failed.field ?? failed.error).toContain('optimizer.learningRate');

      const output = join(servers.dir, 'out-first');
      const accounting = new JobAccountingWatch(nc, 'first-job');
      nc.publish(SUBJECTS.submit, encodeJson(tinyJobSpec('first-job', data, output)));
      accounting.start();
      const events = await waitForEvent(
        nc,
        'first-job',
        (e) => e.type === 'model-exported' || e.type === 'failed',
      ).finally(() => accounting.stop());
      expect(events.at(-1)?.type).toBe('model-exported');
      const stopped = events.find((e) => e.type === 'stopped') as Extract<JobEvent, { type: 'stopped' }>;
      expect(stopped.reason).toBe('target');

      const summary = JSON.parse(readFileSync(join(output, 'summary.json'), 'utf8'));
      expect(summary).toMatchObject({ jobId: 'first-job', stopReason: 'target', metric: 'accuracy' });
      expect(summary.bestValue).toBeGreaterThanOrEqual(0.9);
      for (const field of ['epochs', 'steps', 'wallSeconds', 'samplesPerSecond'])
        expect(typeof summary[field]).toBe('number');

      // The history files: every event of the job once, in stream order, and a line per evaluation.
      const history = await waitUntil(
        'the last event in events.jsonl',
        () => {
          const lines = jsonLines(join(output, 'events.jsonl'));
          return lines.at(-1)?.['type'] === 'model-exported' ? lines : undefined;
        },
        30_000,
      );
      expect(history.map((l) => l['type'])).toEqual(events.map((e) => e.type));
      expect(history.map(({ seq: _seq, ...event }) => event)).toEqual(events);
      const seqs = history.map((l) => l['seq'] as number);
      expect(new Set(seqs).size).toBe(seqs.length);
      expect([...seqs].sort((a, b) => a - b)).toEqual(seqs);
      const evaluations = events.filter((e) => e.type === 'metrics');
      const metrics = jsonLines(join(output, 'metrics.jsonl'));
      expect(metrics.map((m) => m['version'])).toEqual(evaluations.map((e) => e.version));
      for (const m of metrics) {
        expect(m).toMatchObject({ metric: 'accuracy', step: m['version'] });
        for (const field of ['value', 'loss', 'wallSeconds', 'samples', 'epoch'])
          expect(typeof m[field]).toBe('number');
      }
      expect(Math.max(...metrics.map((m) => m['value'] as number))).toBeGreaterThanOrEqual(0.9);
      expect(metrics.at(-1)!['samples'] as number).toBeGreaterThan(0);

      const model = await loadLayersModelFromDir(output);
      const prediction = model.predict(tf.ones([3, TINY_FEATURES])) as tf.Tensor;
      expect(prediction.shape).toEqual([3, 4]);
      prediction.dispose();

      // Every task of every epoch was done exactly once, none discarded.
      accounting.addEpochEvents(events);
      expect(accounting.last?.status.state).toBe('stopped');
      // Epochs 0 to the current one, and the next when its tasks had started to go out.
      const seen = accounting.accounting().map((e) => e.epoch);
      expect(seen.slice(0, accounting.last!.status.epoch + 1)).toEqual(
        Array.from({ length: accounting.last!.status.epoch + 1 }, (_, i) => i),
      );
      expect(seen.length - (accounting.last!.status.epoch + 1)).toBeLessThanOrEqual(1);
      expect(accounting.problems()).toEqual([]);
    },
    JOB_TIMEOUT_MS,
  );

  test(
    'training job - a second job on the same cluster runs too, its gradients and parameters travelling in 16 bits',
    async () => {
      const output = join(servers.dir, 'out-second');
      await new MasterClient(nc, 'e2e-test').submitJob(
        tinyJobSpec('second-job', data, output, {
          model: { preset: 'mlp', hiddenUnits: [8] },
          pservers: { count: 1 },
          transfer: { dtype: 'float16', params: 'bfloat16' },
        }),
      );
      const events = await waitForEvent(nc, 'second-job', (e) => e.type === 'model-exported' || e.type === 'failed');
      expect(events.at(-1)?.type).toBe('model-exported');
      expect(JSON.parse(readFileSync(join(output, 'summary.json'), 'utf8')).stopReason).toBe('target');
    },
    JOB_TIMEOUT_MS,
  );

  test(
    'cli - ps lists every process; submit --wait follows a job to its target; status; stop ends a job by hand',
    async () => {
      const env = { NATS_URL: servers.nats.url, TRIBUTARY_STATE_DIR: join(servers.dir, 'cluster') };
      const ps = await runCli(['ps', '--json'], { env });
      expect(ps.code).toBe(0);
      const rows = JSON.parse(ps.stdout) as { role: string; pid: number; cpus: string }[];
      expect(rows.map((r) => r.role).sort()).toEqual([
        'evaluator',
        'master',
        'pserver',
        'pserver',
        'trainer',
        'trainer',
      ]);
      // Each says where it may run: a pinned trainer its core, the rest every CPU there is here.
      const cores = new Map(cluster.list().map((s) => [s.pid, s.core]));
      const everywhere = formatCpuList(allowedCpus() as number[]);
      for (const row of rows) {
        const core = row.role === 'trainer' ? cores.get(row.pid) : undefined;
        expect(row.cpus).toBe(core === undefined ? everywhere : String(core));
      }

      const good = join(servers.dir, 'cli-job.json');
      writeFileSync(good, JSON.stringify(tinyJobSpec('cli-job', data, join(servers.dir, 'out-cli'))));
      const submitted = await runCli(['submit', good, '--wait'], { env });
      expect(submitted.stderr).toContain('reached its target');
      expect(submitted.code).toBe(0);
      const status = await runCli(['status', 'cli-job'], { env });
      expect(JSON.parse(status.stdout)).toMatchObject({ jobId: 'cli-job', state: 'stopped', reason: 'target' });
      const all = await runCli(['jobs', '--all', '--json'], { env });
      expect(all.code).toBe(0);
      const listed = (JSON.parse(all.stdout) as JobListEntry[]).find((j) => j.jobId === 'cli-job');
      expect(listed).toMatchObject({
        state: 'stopped',
        reason: 'target',
        metric: 'accuracy',
        output: join(servers.dir, 'out-cli'),
      });
      expect(listed!.best).toBeGreaterThanOrEqual(0.9);
      const running = await runCli(['jobs'], { env });
      expect(running.code).toBe(0);
      expect(running.stdout).not.toContain('cli-job');
      const table = await runCli(['jobs', '--all'], { env });
      expect(table.stdout.split('\n')[0]).toMatch(/^ID +STATE +EPOCH +METRIC +LAST +BEST +TRAINERS +STARTED +OUTPUT$/);
      expect(table.stdout).toMatch(/cli-job +stopped \(target\)/);

      const bad = join(servers.dir, 'cli-bad.json');
      writeFileSync(bad, JSON.stringify(tinyJobSpec('cli-bad', data, 'out', { training: { batchSize: 0 } })));
      const refused = await runCli(['submit', bad], { env });
      expect(refused.code).toBe(2);
      expect(refused.stderr).toContain('training.batchSize');

      const long = join(servers.dir, 'cli-long.json');
      writeFileSync(
        long,
        JSON.stringify(
          tinyJobSpec('cli-long', data, join(servers.dir, 'out-long'), {
            stop: { target: 0.999, maxEpochs: 1000 },
            evaluation: { everySteps: 1000 },
          }),
        ),
      );
      const waiting = runCli(['submit', long, '--wait'], { env });
      await waitForEvent(nc, 'cli-long', (e) => e.type === 'started', 30_000);
      const stop = await runCli(['stop', 'cli-long'], { env });
      expect(stop.code).toBe(0);
      const stopped = await waiting;
      expect(stopped.code).toBe(1);
      expect(stopped.stderr).toContain('stopped (manual)');
    },
    JOB_TIMEOUT_MS,
  );
});
