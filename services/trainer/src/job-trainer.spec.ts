import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { Subscription } from '@nats-io/transport-node';
import { validateJobSpec, type JobSpec, type JobSpecInput } from '#libs/job-spec';
import { encodeExampleValues as encodeRecord } from '#libs/dataset';
import { TfjsLearner, selectBackend } from '#libs/learner';
import { MasterClient } from '#libs/master-client';
import {
  SUBJECTS,
  connectNats,
  decodeJsonObject,
  encodeJson,
  ensureStreams,
  ensureTrainerConsumer,
  openBuckets,
  type Buckets,
  type JobRecord,
  type MemberStatus,
  type NatsConnection,
  type TaskMessage,
  type TaskReport,
} from '#libs/messaging';
import { KvShardDirectory, ShardedPserverClient, shardKey } from '#libs/pserver-client';
import { loadIndex, writeRecordFile, type ChunkMeta } from '#libs/recordio';
import type { LineLogger } from '#libs/logging';
import { startShard, startShards, type RunningShard } from '../../pserver/test/in-process-shards.js';
import { startTestServers, type TestServers } from '../../../test/support/servers.js';
import { JobRecordsView } from './job-records-view.js';
import { JobTrainer } from './job-trainer.js';
import { TrainerWorker } from './trainer-worker.js';

const LAYOUT = { featureShape: [4], featureDtype: 'float32', labelDtype: 'int32', numClasses: 3 } as const;
const RECORDS = 60;
const SHARDS = 2;

function specInput(id: string, file: string, out: string): JobSpecInput {
  return {
    id,
    dataset: { train: [file], eval: [file], layout: { ...LAYOUT, featureShape: [4] } },
    model: { preset: 'mlp', hiddenUnits: [8], activation: 'relu' },
    optimizer: { type: 'sgd', learningRate: 0.1 },
    training: { batchSize: 4, mode: 'sync', seed: 7, maxGradientRetries: 3 },
    pservers: { count: SHARDS },
    stop: { maxEpochs: 1 },
    output: out,
  };
}

const quiet: LineLogger = { log: () => undefined, warn: () => undefined, error: (m) => console.error(m) };

/**
 * A minimal master on real NATS: dispatches task messages through the job's work queue,
 * grants claims whose dispatch id is current and records reports.
 */
class TestMaster {
  readonly reports: TaskReport[] = [];
  /** Claims and reports in the order they arrived: `claim j/1`, `done j/0`, ... */
  readonly log: string[] = [];
  private readonly current = new Map<string, string>();
  private readonly subs: Subscription[] = [];
  private waiters: (() => void)[] = [];
  private dispatches = 0;

  constructor(private readonly nc: NatsConnection) {
    this.subs.push(
      nc.subscribe(SUBJECTS.allTaskClaims, {
        callback: (_e, m) => {
          const claim = decodeJsonObject(m.subject, m.data);
          const ok = this.current.get(`${claim['jobId']}/${claim['taskId']}`) === claim['dispatchId'];
          this.log.push(`claim ${claim['jobId']}/${claim['taskId']}`);
          for (const w of this.waiters) w();
          m.respond(
            encodeJson(
              ok ? { ok: true, deadlineMs: Date.now() + 60_000, leaseMs: 60_000 } : { ok: false, reason: 'stale' },
            ),
          );
        },
      }),
      nc.subscribe(SUBJECTS.allTaskReports, {
        callback: (_e, m) => {
          const report = decodeJsonObject(m.subject, m.data) as unknown as TaskReport;
          this.reports.push(report);
          this.log.push(`${report.outcome} ${report.jobId}/${report.taskId}`);
          m.respond(encodeJson({ ok: true, counted: report.outcome === 'done' }));
          for (const w of this.waiters) w();
        },
      }),
    );
  }

  async dispatch(jobId: string, taskId: number, chunks: TaskMessage['chunks']): Promise<void> {
    const dispatchId = `d${++this.dispatches}`;
    this.current.set(`${jobId}/${taskId}`, dispatchId);
    await jetstream(this.nc).publish(
      SUBJECTS.tasks(jobId),
      encodeJson({ jobId, epoch: 0, taskId, dispatchId, chunks }),
    );
  }

  /** Waits until `count` reports of `jobId` arrived. */
  async waitReports(jobId: string, count: number): Promise<TaskReport[]> {
    for (;;) {
      const of = this.reports.filter((r) => r.jobId === jobId);
      if (of.length >= count) return of;
      await new Promise<void>((r) => this.waiters.push(r));
      this.waiters = [];
    }
  }

  /** Waits until a claim of that task arrived. */
  async claimed(jobId: string, taskId: number): Promise<void> {
    while (!this.log.includes(`claim ${jobId}/${taskId}`)) {
      await new Promise<void>((r) => this.waiters.push(r));
      this.waiters = [];
    }
  }

  close(): void {
    for (const s of this.subs) s.unsubscribe();
  }
}

/** Polls until `check` holds (no timing assertion: the test's own timeout bounds it). */
async function eventually(check: () => Promise<boolean> | boolean): Promise<void> {
  while (!(await check())) await new Promise((r) => setTimeout(r, 50));
}

describe('job trainer (real NATS, real parameter servers)', () => {
  let servers: TestServers;
  let nc: NatsConnection;
  let buckets: Buckets;
  let shards: RunningShard[];
  let dir: string;
  let file: string;
  let chunks: readonly ChunkMeta[];
  let master: TestMaster;

  beforeAll(async () => {
    await selectBackend('cpu');
    dir = mkdtempSync(join(tmpdir(), 'trainer-test-'));
    servers = await startTestServers();
    nc = await connectNats(servers.nats.url, 'trainer-test');
    await ensureStreams(nc);
    buckets = await openBuckets(nc);
    shards = await startShards(SHARDS, { dataDir: join(dir, 'pserver') });
    for (const [k, s] of shards.entries()) {
      await buckets.pservers.put(
        shardKey(k),
        encodeJson({
          shard: k,
          address: s.address,
          pid: process.pid,
          id: `pserver-${k}`,
          startedAt: new Date().toISOString(),
        }),
      );
    }
    file = join(dir, 'train-0.recordio');
    const records = Array.from({ length: RECORDS }, (_, i) => encodeRecord([i % 3, 1, -1, (i % 5) / 5], i % 3, LAYOUT));
    // Three records per chunk.
    await writeRecordFile(file, records, { maxChunkSizeBytes: 3 * records[0]!.length });
    chunks = (await loadIndex(file)).chunks;
    master = new TestMaster(nc);
  });

  afterAll(async () => {
    master?.close();
    await Promise.all((shards ?? []).map((s) => s.stop()));
    await nc?.close();
    await servers?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  async function setUpJob(id: string): Promise<JobSpec> {
    const spec = validateJobSpec(specInput(id, file, join(dir, 'out', id)));
    await ensureTrainerConsumer(await jetstreamManager(nc), id, SUBJECTS.tasks(id));
    return spec;
  }

  function taskChunks(first: number, count: number): TaskMessage['chunks'] {
    return chunks.slice(first, first + count).map((c) => ({ file, offset: c.offset, numRecords: c.numRecords }));
  }

  function makeJobTrainer(
    trainerId: string,
    status?: (patch: Partial<MemberStatus>) => void,
    createLearner: () => TfjsLearner = () => new TfjsLearner(),
    idleTaskWaitMs = 1_000,
  ): JobTrainer {
    return new JobTrainer({
      master: new MasterClient(nc, trainerId, { logger: quiet }),
      createLearner,
      connectPservers: async (spec, params) => {
        const directory = await KvShardDirectory.open(buckets.pservers, { shardCount: spec.pservers.count });
        const client = new ShardedPserverClient({ jobId: spec.id, trainerId, params, directory });
        return { client, close: () => (client.close(), directory.close()) };
      },
      logger: quiet,
      status,
      idleTaskWaitMs,
    });
  }

  function pserverStatus(jobId: string) {
    const client = ShardedPserverClient.fromAddresses(
      shards.map((s) => s.address),
      { jobId, trainerId: 'observer', params: [] },
    );
    return client.status().finally(() => client.close());
  }

  it('trainer - trains tasks against real parameter servers, reports them, fails a corrupt chunk, leaves when idle', async () => {
    const spec = await setUpJob('tiny');
    const stop = new AbortController();
    const preempt = new AbortController();
    const run = makeJobTrainer('trainer-1').run(spec, { stop: stop.signal, preempt: preempt.signal });

    // Three tasks of two chunks (6 records each: minibatches of 4 and 2).
    for (let t = 0; t < 3; t++) await master.dispatch('tiny', t, taskChunks(2 * t, 2));
    const done = await master.waitReports('tiny', 3);
    expect(done.map((r) => [r.taskId, r.outcome, r.samples, r.trainerId])).toEqual([
      [0, 'done', 6, 'trainer-1'],
      [1, 'done', 6, 'trainer-1'],
      [2, 'done', 6, 'trainer-1'],
    ]);
    // One trainer is the whole quorum: every minibatch is one synchronous step on every shard.
    const status = await pserverStatus('tiny');
    expect(status.map((s) => s.jobs[0]?.version)).toEqual([6, 6]);

    // A task naming an offset inside a chunk: the RecordIO error (file and offset) is reported.
    await master.dispatch('tiny', 3, [{ file, offset: 5, numRecords: 3 }]);
    const [failed] = (await master.waitReports('tiny', 4)).slice(3);
    expect(failed).toMatchObject({ taskId: 3, outcome: 'failed' });
    expect(failed!.error).toContain(file);
    expect(failed!.error).toContain('byte 5');

    // No task within a second: the trainer leaves the quorum.
    await eventually(async () => (await pserverStatus('tiny')).every((s) => s.jobs[0]?.members.length === 0));

    stop.abort();
    await expect(run).resolves.toBe('stopped');
  });

  it('trainer - with no next task in hand it steps out of the quorum while it waits for one, and joins again with the next', async () => {
    const spec = await setUpJob('step-out');
    const stop = new AbortController();
    const states: Partial<MemberStatus>[] = [];
    // A pull for a task waits up to 5 s before the trainer counts as idle (and says so).
    const run = makeJobTrainer('trainer-4', (patch) => states.push(patch), undefined, 5_000).run(spec, {
      stop: stop.signal,
      preempt: new AbortController().signal,
    });
    const members = async () => (await pserverStatus('step-out')).map((s) => s.jobs[0]?.members.length);
    try {
      await master.dispatch('step-out', 0, taskChunks(0, 2));
      await master.waitReports('step-out', 1);
      const idleBefore = states.filter((s) => s.state === 'idle').length;
      // The end of an epoch: the last tasks train elsewhere, and another trainer's synchronous
      // steps must not wait for this one, which has nothing to push. It is out of the quorum
      // while its pull still waits: before the pull comes back empty and it says it is idle.
      await eventually(async () => (await members()).every((n) => n === 0));
      expect(states.filter((s) => s.state === 'idle').length).toBe(idleBefore);
      await master.dispatch('step-out', 1, taskChunks(2, 2));
      const reports = await master.waitReports('step-out', 2);
      expect(reports.map((r) => [r.taskId, r.outcome, r.samples])).toEqual([
        [0, 'done', 6],
        [1, 'done', 6],
      ]);
      // Task 1 came to the pull that was waiting: the trainer never went idle in between.
      expect(states.filter((s) => s.state === 'idle').length).toBe(idleBefore);
      // Two minibatches (4 and 2 records) per task, each a step on every shard.
      expect((await pserverStatus('step-out')).map((s) => s.jobs[0]?.version)).toEqual([4, 4]);
    } finally {
      stop.abort();
    }
    await expect(run).resolves.toBe('stopped');
  });

  it('trainer - preemption finishes the minibatch, hands the task back and leaves the quorum', async () => {
    const spec = await setUpJob('preempt');
    const preempt = new AbortController();
    const stop = new AbortController();
    const states: Partial<MemberStatus>[] = [];
    // SIGTERM arrives while the first minibatch is being computed.
    const createLearner = () => {
      const learner = new TfjsLearner();
      const train = learner.train.bind(learner);
      learner.train = (batch) => {
        preempt.abort();
        return train(batch);
      };
      return learner;
    };
    const jobTrainer = makeJobTrainer('trainer-2', (patch) => states.push(patch), createLearner);
    const run = jobTrainer.run(spec, { stop: stop.signal, preempt: preempt.signal });
    await master.dispatch('preempt', 0, taskChunks(0, 6));

    await expect(run).resolves.toBe('preempted');
    const [report] = await master.waitReports('preempt', 1);
    expect(report).toMatchObject({ taskId: 0, outcome: 'returned', trainerId: 'trainer-2' });
    const status = await pserverStatus('preempt');
    expect(status.map((s) => s.jobs[0]?.version)).toEqual([1, 1]);
    expect(status.every((s) => s.jobs[0]?.members.length === 0)).toBe(true);
    expect(states.at(-1)).toMatchObject({ state: 'idle', jobId: undefined });
  });

  it('trainer - the next task is claimed before the last minibatch of the one in hand; preempted, it goes back', async () => {
    const spec = await setUpJob('ahead');
    const stop = new AbortController();
    const preempt = new AbortController();
    let minibatches = 0;
    // Tasks of 6 records: minibatches of 4 and 2. The last minibatch of each task waits for the
    // next task's claim, which comes only if it was made ahead. During task 1's last minibatch
    // the trainer is preempted: task 1 still ends done, task 2 was claimed and goes back.
    const createLearner = () => {
      const learner = new TfjsLearner();
      const train = learner.train.bind(learner);
      learner.train = async (batch) => {
        minibatches += 1;
        if (minibatches % 2 === 0) {
          const task = minibatches / 2;
          await master.claimed('ahead', task);
          if (task === 2) preempt.abort();
        }
        return train(batch);
      };
      return learner;
    };
    const run = makeJobTrainer('trainer-5', undefined, createLearner).run(spec, {
      stop: stop.signal,
      preempt: preempt.signal,
    });
    for (let t = 0; t < 3; t++) await master.dispatch('ahead', t, taskChunks(2 * t, 2));

    await expect(run).resolves.toBe('preempted');
    const reports = await master.waitReports('ahead', 3);
    expect(reports.map((r) => [r.taskId, r.outcome, r.samples]).sort()).toEqual([
      [0, 'done', 6],
      [1, 'done', 6],
      [2, 'returned', undefined],
    ]);
    const log = master.log.filter((e) => e.includes(' ahead/'));
    expect(log.indexOf('claim ahead/1')).toBeLessThan(log.indexOf('done ahead/0'));
    expect(log.indexOf('claim ahead/2')).toBeLessThan(log.indexOf('done ahead/1'));
    const status = await pserverStatus('ahead');
    expect(status.map((s) => s.jobs[0]?.version)).toEqual([4, 4]);
  });

  it('trainer - serves the running job from the jobs bucket, goes idle when it stops, then serves the next', async () => {
    const first = await setUpJob('first');
    const second = await setUpJob('second');
    const client = new MasterClient(nc, 'trainer-3', { logger: quiet });
    const jobRecords = new JobRecordsView(await client.watchJobs());
    const states: Partial<MemberStatus>[] = [];
    const worker = new TrainerWorker({
      jobRecords,
      jobTrainer: makeJobTrainer('trainer-3', (p) => states.push(p)),
      events: (jobId) => client.events(jobId),
      logger: quiet,
      setupRetryMs: 200,
    });
    const record = (spec: JobSpec, state: JobRecord['state']): Uint8Array =>
      encodeJson({ jobId: spec.id, state, spec, epoch: 0, startedAt: new Date(Date.now() - 1000).toISOString() });

    await buckets.jobs.put('first', record(first, 'running'));
    worker.start();
    await master.dispatch('first', 0, taskChunks(0, 1));
    await master.waitReports('first', 1);

    await buckets.jobs.put('second', record(second, 'running'));
    await buckets.jobs.put('first', record(first, 'stopped'));
    await master.dispatch('second', 0, taskChunks(1, 1));
    const [report] = await master.waitReports('second', 1);
    expect(report).toMatchObject({ outcome: 'done', samples: 3, trainerId: 'trainer-3' });
    expect(states.some((s) => s.state === 'idle' && s.jobId === undefined)).toBe(true);

    await worker.stop();
    jobRecords.stop();
    expect(states.at(-1)).toMatchObject({ state: 'idle', jobId: undefined });
  });

  it('trainer - overlapped local rounds go on across tasks; each task is reported once its last round landed, in order', async () => {
    const input = specInput('overlap', file, join(dir, 'out', 'overlap'));
    const spec = validateJobSpec({
      ...input,
      training: { ...input.training, batchSize: 2, mode: 'local', localSteps: 2, overlapRounds: true },
    });
    await ensureTrainerConsumer(await jetstreamManager(nc), spec.id, SUBJECTS.tasks(spec.id));
    const stop = new AbortController();
    const run = makeJobTrainer('trainer-o', undefined, () => new TfjsLearner({ mode: 'delta' })).run(spec, {
      stop: stop.signal,
      preempt: new AbortController().signal,
    });
    try {
      for (let t = 0; t < 3; t++) await master.dispatch('overlap', t, taskChunks(2 * t, 2));
      const reports = await master.waitReports('overlap', 3);
      expect(reports.map((r) => [r.taskId, r.outcome, r.samples])).toEqual([
        [0, 'done', 6],
        [1, 'done', 6],
        [2, 'done', 6],
      ]);
      // Three minibatches of 2 per task: rounds of 2 and 1 steps, each one version on every
      // shard. The last task's last round landed before it was reported.
      expect((await pserverStatus('overlap')).map((s) => s.jobs[0]?.version)).toEqual([6, 6]);
    } finally {
      stop.abort();
    }
    await expect(run).resolves.toBe('stopped');
  });

  it('trainer - a parameter server restarted mid-task is waited for; the task still ends done', async () => {
    const spec = await setUpJob('restart');
    const stop = new AbortController();
    const preempt = new AbortController();
    let minibatches = 0;
    let restarted: Promise<void> | undefined;
    // Shard 1 goes down during the fourth minibatch and comes back on the same address.
    const createLearner = () => {
      const learner = new TfjsLearner();
      const train = learner.train.bind(learner);
      learner.train = (batch) => {
        minibatches += 1;
        if (minibatches === 4) {
          restarted = (async () => {
            const port = Number(shards[1]!.address.split(':').pop());
            await shards[1]!.stop();
            await new Promise((r) => setTimeout(r, 500));
            shards[1] = await startShard({ shard: 1, dataDir: join(dir, 'pserver', 'shard-1'), port });
          })();
        }
        return train(batch);
      };
      return learner;
    };
    const run = makeJobTrainer('trainer-4', undefined, createLearner).run(spec, {
      stop: stop.signal,
      preempt: preempt.signal,
    });
    await master.dispatch('restart', 0, taskChunks(0, 6));
    const [report] = await master.waitReports('restart', 1);
    expect(report).toMatchObject({ taskId: 0, outcome: 'done', samples: 18, trainerId: 'trainer-4' });
    await restarted;
    // Every minibatch was one step on each shard, the restart notwithstanding.
    const status = await pserverStatus('restart');
    expect(status.map((s) => s.jobs[0]?.version)).toEqual([5, 5]);
    stop.abort();
    await expect(run).resolves.toBe('stopped');
  });
});
