import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { jetstream, type JetStreamClient } from '@nats-io/jetstream';
import { validateJobSpec, type JobSpec } from '#libs/job-spec';
import { encodeExampleValues as encodeRecord } from '#libs/dataset';
import { TfjsLearner, loadLayersModelFromDir, selectBackend, type PlainTensor } from '#libs/learner';
import {
  SUBJECTS,
  connectNats,
  decodeJsonObject,
  encodeJson,
  ensureStreams,
  openBuckets,
  type Buckets,
  type JobRecord,
  type JobSummary,
  type NatsConnection,
  type StopReason,
} from '#libs/messaging';
import { Compressor, writeRecordFile } from '#libs/recordio';
import { PserverError, ShardCallError } from '#libs/pserver-client';
import type { LineLogger } from '#libs/logging';
import { startTestServers, type TestServers } from '../../../test/support/servers.js';
import { SnapshotParamsError } from './errors.js';
import { Evaluator } from './evaluator.js';
import type { SnapshotParamsSource, VersionedParams } from './snapshot-params.js';

const FEATURES = 3;
const EVAL_EXAMPLES = 60;

/** Deterministic features in [0, 1); the label is the index of the largest feature. */
function evalRecords(): Uint8Array[] {
  let state = 12345;
  const next = () => {
    state = (state * 1103515245 + 12345) % 2 ** 31;
    return state / 2 ** 31;
  };
  return Array.from({ length: EVAL_EXAMPLES }, () => {
    const x = Array.from({ length: FEATURES }, next);
    const label = x.indexOf(Math.max(...x));
    return encodeRecord(x, label, { featureShape: [FEATURES], featureDtype: 'float32', labelDtype: 'int32' });
  });
}

/**
 * Parameters of the test MLP (one relu hidden layer of 3 units): every square kernel is
 * `scale` times the identity and every bias zero. scale 10 predicts the largest feature (all
 * right); scale 0 predicts class 0 for everything.
 */
function scaledIdentity(template: PlainTensor[], scale: number): PlainTensor[] {
  return template.map((p) => {
    const data = new Float32Array(p.data.length);
    if (p.shape.length === 2 && p.shape[0] === p.shape[1])
      for (let i = 0; i < p.shape[0]!; i++) data[i * p.shape[0]! + i] = scale;
    return { ...p, data };
  });
}

/** Feeds the evaluator parameters by version, as a pserver would. */
class FakeParams implements SnapshotParamsSource {
  readonly loaded: number[] = [];
  current: VersionedParams | undefined;
  /** Versions the shards no longer keep: training went past them. */
  readonly passed = new Set<number>();
  constructor(private readonly byVersion: Map<number, PlainTensor[]>) {}

  async loadSnapshot(spec: JobSpec, version: number): Promise<PlainTensor[]> {
    if (this.passed.has(version)) {
      const gone = new PserverError(`snapshot of version ${version} is not retained`, 1, 5, 'snapshot-not-retained');
      const cause = new ShardCallError('pullParams', [undefined, gone]);
      throw new SnapshotParamsError(spec.id, version, cause.message, { cause });
    }
    const params = this.byVersion.get(version);
    if (params === undefined) throw new SnapshotParamsError(spec.id, version, 'no such snapshot');
    this.loaded.push(version);
    return params;
  }

  async loadCurrent(spec: JobSpec): Promise<VersionedParams> {
    if (this.current === undefined) throw new SnapshotParamsError(spec.id, 'current', 'nothing yet');
    return this.current;
  }

  async release(): Promise<void> {}
  async close(): Promise<void> {}
}

const quietLogger = (): LineLogger & { lines: string[] } => {
  const lines: string[] = [];
  return {
    lines,
    log: (m) => lines.push(m),
    warn: (m) => lines.push(`WARN ${m}`),
    error: (m) => lines.push(`ERROR ${m}`),
  };
};

async function waitFor<T>(probe: () => T | undefined, what: string, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('evaluator', () => {
  let servers: TestServers;
  let nc: NatsConnection;
  let js: JetStreamClient;
  let buckets: Buckets;
  let dir: string;
  let template: PlainTensor[];
  const events: Record<string, unknown>[] = [];
  const stops: { subject: string; body: Record<string, unknown> }[] = [];
  const statusReplies = new Map<string, number>();

  const specInput = (
    id: string,
    extra: { stop: Record<string, number>; eval?: string[]; evaluation?: Record<string, number | string> },
  ) => ({
    id,
    dataset: {
      train: [join(dir, 'eval.rio')],
      eval: extra.eval ?? [join(dir, 'eval.rio')],
      layout: { featureShape: [FEATURES], featureDtype: 'float32', labelDtype: 'int32', numClasses: FEATURES },
    },
    model: { preset: 'mlp', hiddenUnits: [FEATURES], activation: 'relu' },
    optimizer: { type: 'sgd', learningRate: 0.1 },
    training: { batchSize: 8, seed: 7 },
    pservers: { count: 2 },
    evaluation: { everySteps: 10, metric: 'accuracy', batchSize: 16, maxExamples: 50, ...extra.evaluation },
    stop: extra.stop,
    output: join(dir, 'out', id),
  });

  /** The record the master writes when it stops a job now. */
  const stoppedRecord = (record: Omit<JobRecord, 'state'>, reason: StopReason): JobRecord => ({
    ...record,
    state: 'stopped',
    stoppedAt: new Date().toISOString(),
    reason,
  });
  const putRecord = async (record: JobRecord) => {
    await buckets.jobs.put(record.jobId, encodeJson(record));
  };
  const notice = (jobId: string, shard: number, version: number) =>
    js.publish(SUBJECTS.snapshots(jobId), encodeJson({ jobId, shard, version, at: new Date().toISOString() }));
  const eventsOf = (jobId: string, type: string) => events.filter((e) => e['jobId'] === jobId && e['type'] === type);

  beforeAll(async () => {
    await selectBackend('cpu');
    servers = await startTestServers();
    nc = await connectNats(servers.nats.url, 'evaluator test');
    await ensureStreams(nc);
    buckets = await openBuckets(nc);
    js = jetstream(nc);
    dir = mkdtempSync(join(servers.dir, 'evaluator-'));
    await writeRecordFile(join(dir, 'eval.rio'), evalRecords(), { compressor: Compressor.Snappy });
    const learner = new TfjsLearner();
    await learner.initialize({
      model: { preset: 'mlp', hiddenUnits: [FEATURES], activation: 'relu', dropout: 0 },
      layout: {
        featureShape: [FEATURES],
        featureDtype: 'float32',
        scale: 1,
        labelDtype: 'int32',
        numClasses: FEATURES,
      },
    });
    template = await learner.getParams();
    learner.shutdown();
    nc.subscribe(SUBJECTS.allEvents, { callback: (_e, m) => void events.push(decodeJsonObject(m.subject, m.data)) });
    nc.subscribe(SUBJECTS.allStop, {
      callback: (_e, m) => void stops.push({ subject: m.subject, body: decodeJsonObject(m.subject, m.data) }),
    });
    // Plays the master's status replies.
    nc.subscribe(SUBJECTS.allStatus, {
      callback: (_e, m) => {
        const jobId = m.subject.split('.')[2]!;
        const samples = statusReplies.get(jobId);
        m.respond(
          encodeJson(
            samples === undefined ? { error: `unknown job ${jobId}` } : { jobId, state: 'stopped', epoch: 0, samples },
          ),
        );
      },
    });
  });

  afterAll(async () => {
    await nc?.drain();
    await servers?.stop();
  });

  it('evaluator - evaluates complete snapshots, stops at the target, exports the best model', async () => {
    const jobId = 'eval-target';
    const spec = validateJobSpec(specInput(jobId, { stop: { target: 0.99 } }));
    const params = new FakeParams(
      new Map([
        [10, scaledIdentity(template, 0)],
        [20, scaledIdentity(template, 10)],
      ]),
    );
    const startedAt = new Date().toISOString();
    const logger = quietLogger();
    await putRecord({ jobId, state: 'running', spec, epoch: 0, startedAt });
    const evaluator = new Evaluator(nc, buckets, params, logger, { id: 'evaluator-test-1' });
    await evaluator.start();
    try {
      await notice(jobId, 0, 10);
      await notice(jobId, 1, 10);
      const first = await waitFor(() => eventsOf(jobId, 'metrics')[0], 'metrics of version 10');
      expect(first).toMatchObject({ version: 10, epoch: 0, examples: 50 });
      const firstMetrics = first['metrics'] as { loss: number; accuracy: number };
      expect(firstMetrics.loss).toBeCloseTo(Math.log(3), 4);
      expect(firstMetrics.accuracy).toBeLessThan(0.6);
      expect(first['best']).toBe(firstMetrics.accuracy);

      // Garbage is skipped; a version only one shard announced is not evaluated.
      await js.publish(SUBJECTS.snapshots(jobId), new TextEncoder().encode('garbage'));
      await notice(jobId, 0, 20);
      await waitFor(() => logger.lines.some((l) => l.includes('skipping snapshot notice')), 'garbage skipped');
      expect(params.loaded).toEqual([10]);
      await notice(jobId, 1, 20);

      const second = await waitFor(() => eventsOf(jobId, 'metrics')[1], 'metrics of version 20');
      expect(second).toMatchObject({ version: 20, metrics: { accuracy: 1 }, best: 1 });
      const stop = await waitFor(() => stops.find((s) => s.subject === SUBJECTS.stop(jobId)), 'stop decision');
      expect(stop.body).toMatchObject({ reason: 'target' });
      expect(String(stop.body['detail'])).toContain('version 20');

      // The master's side: the job stops; the evaluator exports once.
      statusReplies.set(jobId, 4321);
      const stopped: JobRecord = {
        jobId,
        state: 'stopped',
        spec,
        epoch: 3,
        startedAt,
        stoppedAt: new Date(Date.parse(startedAt) + 10_000).toISOString(),
        reason: 'target',
      };
      await putRecord(stopped);
      const exported = await waitFor(() => eventsOf(jobId, 'model-exported')[0], 'model-exported');
      expect(exported).toMatchObject({ output: spec.output, bestValue: 1 });
      await putRecord({ ...stopped });
      await evaluator.run(jobId)!.finish();

      const summary = JSON.parse(readFileSync(join(spec.output, 'summary.json'), 'utf8')) as JobSummary;
      expect(summary).toEqual({
        jobId,
        startedAt,
        stopReason: 'target',
        metric: 'accuracy',
        bestValue: 1,
        bestVersion: 20,
        epochs: 3,
        steps: 20,
        wallSeconds: 10,
        samples: 4321,
        samplesPerSecond: 432.1,
      });
      const model = await loadLayersModelFromDir(spec.output);
      const prediction = tf.tidy(() =>
        (
          model.predict(
            tf.tensor2d([
              [0.1, 0.9, 0.2],
              [0.8, 0.1, 0.3],
            ]),
          ) as tf.Tensor
        )
          .argMax(1)
          .arraySync(),
      );
      expect(prediction).toEqual([1, 0]);
      model.dispose();
      expect(eventsOf(jobId, 'model-exported')).toHaveLength(1);
      expect(stops.filter((s) => s.subject === SUBJECTS.stop(jobId))).toHaveLength(1);
    } finally {
      await evaluator.stop();
      await buckets.jobs.delete(jobId);
    }
  });

  it('evaluator - evaluates only the newest complete snapshot of a backlog, and a restarted one exports a stopped job', async () => {
    const jobId = 'eval-restart';
    const spec = validateJobSpec(specInput(jobId, { stop: { patience: 5 } }));
    const startedAt = new Date().toISOString();
    const versions = new Map([1, 2, 3].map((v) => [v, scaledIdentity(template, v === 3 ? 10 : 0)] as const));
    const params = new FakeParams(versions);
    await putRecord({ jobId, state: 'running', spec, epoch: 1, startedAt });
    for (const v of [1, 2, 3]) for (const shard of [0, 1]) await notice(jobId, shard, v);
    await notice(jobId, 0, 4);

    const first = new Evaluator(nc, buckets, params, quietLogger(), { id: 'evaluator-test-2' });
    await first.start();
    const metrics = await waitFor(() => eventsOf(jobId, 'metrics')[0], 'metrics of the backlog');
    expect(metrics).toMatchObject({ version: 3, epoch: 1, metrics: { accuracy: 1 } });
    await first.stop();
    expect(params.loaded).toEqual([3]);
    // What it learnt stays in the job's output for the next evaluator.
    expect(existsSync(join(spec.output, 'best', 'state.json'))).toBe(true);

    // Stopped by hand while no evaluator ran.
    await putRecord(stoppedRecord({ jobId, spec, epoch: 1, startedAt }, 'manual'));
    params.current = { version: 5, params: scaledIdentity(template, 10) };
    const logger = quietLogger();
    const second = new Evaluator(nc, buckets, params, logger, { id: 'evaluator-test-3' });
    await second.start();
    try {
      const exported = await waitFor(() => eventsOf(jobId, 'model-exported')[0], 'export after restart');
      expect(exported).toMatchObject({ bestValue: 1 });
      // The best parameters the first evaluator kept are exported, not whatever is current.
      const summary = JSON.parse(readFileSync(join(spec.output, 'summary.json'), 'utf8')) as JobSummary;
      expect(summary).toMatchObject({ jobId, stopReason: 'manual', bestValue: 1, bestVersion: 3, steps: 3, epochs: 1 });
      // No master answered: samples are estimated from the steps.
      expect(summary.samples).toBe(3 * 8);
      // The best checkpoint goes once the event is out (a crash in between leaves it, harmlessly).
      await waitFor(() => !existsSync(join(spec.output, 'best')), 'the best checkpoint removed after the export');
    } finally {
      await second.stop();
    }
    // A third start finds the export done and leaves it alone.
    const thirdLogger = quietLogger();
    const third = new Evaluator(nc, buckets, params, thirdLogger, { id: 'evaluator-test-4' });
    await third.start();
    await waitFor(
      () => thirdLogger.lines.some((l) => l.includes(`job ${jobId}: stopped and already exported`)),
      'the export found done',
    );
    expect(third.run(jobId)).toBeUndefined();
    await third.stop();
    await buckets.jobs.delete(jobId);
  });

  it('evaluator - a restarted evaluator keeps the best parameters and the patience count of the run', async () => {
    const jobId = 'eval-resume';
    const spec = validateJobSpec(specInput(jobId, { stop: { patience: 2 } }));
    const good = scaledIdentity(template, 10);
    const params = new FakeParams(
      new Map([
        [1, good],
        [2, scaledIdentity(template, 0)],
        [3, scaledIdentity(template, 0)],
      ]),
    );
    const startedAt = new Date().toISOString();
    await putRecord({ jobId, state: 'running', spec, epoch: 0, startedAt });
    const first = new Evaluator(nc, buckets, params, quietLogger(), { id: 'evaluator-test-8' });
    await first.start();
    for (const v of [1, 2]) {
      await notice(jobId, 0, v);
      await notice(jobId, 1, v);
      await waitFor(() => eventsOf(jobId, 'metrics').find((e) => e['version'] === v), `metrics of version ${v}`);
    }
    // Gone without a word, as if killed; a new one takes over the running job.
    await first.stop();
    const logger = quietLogger();
    const second = new Evaluator(nc, buckets, params, logger, { id: 'evaluator-test-9' });
    await second.start();
    try {
      await notice(jobId, 0, 3);
      await notice(jobId, 1, 3);
      const third = await waitFor(() => eventsOf(jobId, 'metrics').find((e) => e['version'] === 3), 'metrics of 3');
      expect(third['best']).toBe(1);
      // Two evaluations without improvement in all, one on each side of the restart.
      const stop = await waitFor(() => stops.find((s) => s.subject === SUBJECTS.stop(jobId)), 'patience stop');
      expect(stop.body).toMatchObject({ reason: 'patience' });
      expect(String(stop.body['detail'])).toContain('at version 1');
      expect(logger.lines.join('\n')).toContain('resumed from the best checkpoint');

      await putRecord(stoppedRecord({ jobId, spec, epoch: 1, startedAt }, 'patience'));
      await waitFor(() => eventsOf(jobId, 'model-exported')[0], 'export');
      const summary = JSON.parse(readFileSync(join(spec.output, 'summary.json'), 'utf8')) as JobSummary;
      expect(summary).toMatchObject({ stopReason: 'patience', bestValue: 1, bestVersion: 1 });
    } finally {
      await second.stop();
      await buckets.jobs.delete(jobId);
    }
  });

  it('evaluator - a missing evaluation file is reported, and a job the master stopped on its epoch budget is exported unscored', async () => {
    const jobId = 'eval-missing';
    const spec = validateJobSpec(specInput(jobId, { stop: { maxEpochs: 2 }, eval: [join(dir, 'missing-*.rio')] }));
    const params = new FakeParams(new Map([[10, scaledIdentity(template, 10)]]));
    const startedAt = new Date().toISOString();
    await putRecord({ jobId, state: 'running', spec, epoch: 0, startedAt });
    const logger = quietLogger();
    const evaluator = new Evaluator(nc, buckets, params, logger, { id: 'evaluator-test-5' });
    await evaluator.start();
    try {
      await notice(jobId, 0, 10);
      await notice(jobId, 1, 10);
      const failure = await waitFor(() => eventsOf(jobId, 'evaluation-failed')[0], 'evaluation-failed');
      expect(String(failure['error'])).toContain('missing-*.rio');
      expect(failure['version']).toBe(10);
      expect(logger.lines.some((l) => l.startsWith('ERROR') && l.includes('missing-*.rio'))).toBe(true);

      // The master's side: the second epoch ends and the job stops on its budget.
      params.current = { version: 12, params: scaledIdentity(template, 10) };
      await putRecord(stoppedRecord({ jobId, spec, epoch: 2, startedAt }, 'maxEpochs'));
      await waitFor(() => eventsOf(jobId, 'model-exported')[0], 'unscored export');
      const summary = JSON.parse(readFileSync(join(spec.output, 'summary.json'), 'utf8')) as JobSummary;
      expect(summary).toMatchObject({ stopReason: 'maxEpochs', bestValue: null, bestVersion: 12, epochs: 2 });
      const model = await loadLayersModelFromDir(spec.output);
      expect(model.outputs[0]!.shape).toEqual([null, FEATURES]);
      model.dispose();
    } finally {
      await evaluator.stop();
      await buckets.jobs.delete(jobId);
    }
  });

  it('evaluator - leaves the epoch and time budgets to the master: past both, it keeps evaluating and sends no stop', async () => {
    const jobId = 'eval-budgets';
    const spec = validateJobSpec(specInput(jobId, { stop: { maxEpochs: 2, maxSeconds: 5 } }));
    const params = new FakeParams(
      new Map([
        [10, scaledIdentity(template, 0)],
        [20, scaledIdentity(template, 10)],
      ]),
    );
    const startedAt = new Date(Date.now() - 6_000).toISOString();
    await putRecord({ jobId, state: 'running', spec, epoch: 2, startedAt });
    const evaluator = new Evaluator(nc, buckets, params, quietLogger(), { id: 'evaluator-test-6' });
    await evaluator.start();
    try {
      for (const v of [10, 20]) {
        await notice(jobId, 0, v);
        await notice(jobId, 1, v);
        await waitFor(() => eventsOf(jobId, 'metrics').find((e) => e['version'] === v), `metrics of version ${v}`);
      }
      // A stop decided on version 10 would have gone out, on the same connection, before the
      // metrics of version 20.
      expect(stops.filter((s) => s.subject === SUBJECTS.stop(jobId))).toEqual([]);

      // The master stops the job on its time budget; the evaluator exports as for any stop.
      await putRecord(stoppedRecord({ jobId, spec, epoch: 2, startedAt }, 'maxSeconds'));
      await waitFor(() => eventsOf(jobId, 'model-exported')[0], 'export after the budget stop');
      const summary = JSON.parse(readFileSync(join(spec.output, 'summary.json'), 'utf8')) as JobSummary;
      expect(summary).toMatchObject({ stopReason: 'maxSeconds', bestValue: 1, bestVersion: 20, epochs: 2 });
    } finally {
      await evaluator.stop();
      await buckets.jobs.delete(jobId);
    }
  });

  it('evaluator - with evaluation.everySeconds, the current parameters are scored when no snapshot came in time', async () => {
    const jobId = 'eval-every-seconds';
    const spec = validateJobSpec(
      specInput(jobId, { stop: { maxEpochs: 100 }, evaluation: { everySteps: 1_000_000, everySeconds: 0.5 } }),
    );
    await putRecord({ jobId, state: 'running', spec, epoch: 0, startedAt: new Date().toISOString() });
    const params = new FakeParams(new Map());
    params.current = { version: 7, params: template };
    const evaluator = new Evaluator(nc, buckets, params, quietLogger(), { id: 'evaluator-test-7' });
    await evaluator.start();
    try {
      const metrics = await waitFor(() => eventsOf(jobId, 'metrics')[0], 'an evaluation on time');
      expect(metrics).toMatchObject({ version: 7 });
      // The same version is not scored twice; a newer one is.
      params.current = { version: 9, params: template };
      await waitFor(() => eventsOf(jobId, 'metrics').find((e) => e['version'] === 9), 'a second evaluation');
      expect(eventsOf(jobId, 'metrics').filter((e) => e['version'] === 7)).toHaveLength(1);
    } finally {
      await evaluator.stop();
      await buckets.jobs.delete(jobId);
    }
  });

  it('evaluator - a snapshot the shards no longer keep is replaced by what they hold now', async () => {
    const jobId = 'eval-passed';
    const spec = validateJobSpec(specInput(jobId, { stop: { maxEpochs: 100 } }));
    await putRecord({ jobId, state: 'running', spec, epoch: 0, startedAt: new Date().toISOString() });
    const params = new FakeParams(new Map());
    params.passed.add(10);
    params.current = { version: 37, params: scaledIdentity(template, 10) };
    const logger = quietLogger();
    const evaluator = new Evaluator(nc, buckets, params, logger, { id: 'evaluator-test-passed' });
    await evaluator.start();
    try {
      await notice(jobId, 0, 10);
      await notice(jobId, 1, 10);
      const metrics = await waitFor(() => eventsOf(jobId, 'metrics')[0], 'an evaluation of the current version');
      expect(metrics).toMatchObject({ version: 37 });
      expect(logger.lines.some((l) => /passed snapshot 10 before it was fetched; scoring version 37/.test(l))).toBe(
        true,
      );
    } finally {
      await evaluator.stop();
      await buckets.jobs.delete(jobId);
    }
  });

  it('evaluator - keeps a member status entry', async () => {
    const evaluator = new Evaluator(nc, buckets, new FakeParams(new Map()), quietLogger(), {
      id: 'evaluator-test-7',
      backend: 'cpu',
    });
    await evaluator.start();
    try {
      let entry = await buckets.members.get('evaluator.evaluator-test-7');
      for (let i = 0; i < 100 && entry === null; i++) {
        await new Promise((r) => setTimeout(r, 50));
        entry = await buckets.members.get('evaluator.evaluator-test-7');
      }
      const status = decodeJsonObject('members', entry!.value);
      expect(status).toMatchObject({ role: 'evaluator', id: 'evaluator-test-7', backend: 'cpu' });
      expect(['idle', 'watching']).toContain(status['state']);
    } finally {
      await evaluator.stop();
    }
  });
});
