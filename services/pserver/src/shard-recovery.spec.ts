import { existsSync } from 'node:fs';
import { mkdtemp, readFile, readdir, rm, truncate, unlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DataType } from '#libs/pserver-protocol';
import { ShardedPserverClient, type ParamInfo, type ShardDirectory, type TensorLike } from '#libs/pserver-client';
import type { LineLogger } from '#libs/logging';
import { CHECKPOINT_METADATA_FILE, checkpointFileName } from './checkpoint.js';
import { CheckpointError, GradientVersionError, JobUnknownToShardError } from './errors.js';
import { startShard, type RunningShard } from '../test/in-process-shards.js';
import { ParameterShard } from './parameter-shard.js';
import { PROGRESS_RECORD_FILE, readProgressRecord } from './progress-record.js';

const JOB = 'job-1';
const LR = 0.5;
const spec = (extra: object = {}) =>
  JSON.stringify({
    optimizer: { type: 'sgd', learningRate: LR },
    checkpoint: { everySteps: 2 },
    evaluation: { everySteps: 1000 },
    ...extra,
  });
const PARAMS = [
  { name: 'w', dtype: DataType.FLOAT32, shape: [2] },
  { name: 'b', dtype: DataType.FLOAT32, shape: [1] },
];
const ones = () =>
  new Map([
    ['w', Float32Array.of(1, 1)],
    ['b', Float32Array.of(1)],
  ]);

let dir: string;
let lines: string[];
const logger: LineLogger = {
  log: (m) => lines.push(`log ${m}`),
  warn: (m) => lines.push(`warn ${m}`),
  error: (m) => lines.push(`error ${m}`),
};

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tributary-recovery-'));
  lines = [];
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

function newShard(): ParameterShard {
  return new ParameterShard({ shard: 0, dataDir: dir, logger });
}

/** A shard that ran `steps` synchronous steps of `trainers` (each pushing ones). */
async function trained(steps: number, trainers = ['t'], specJson = spec()): Promise<ParameterShard> {
  const shard = newShard();
  await shard.beginInit({ jobId: JOB, trainerId: trainers[0], specJson, params: PARAMS, shardCount: 1 });
  const job = await shard.job(JOB);
  job.initTensors(trainers[0], [
    { name: 'w', shape: [2], value: Float32Array.of(10, 20) },
    { name: 'b', shape: [1], value: Float32Array.of(0) },
  ]);
  for (const t of trainers) job.join(t);
  expect(await shard.finishInit(JOB, trainers[0])).toBe(0);
  const every = job.settings.checkpointEverySteps ?? Infinity;
  for (let v = 0; v < steps; v++) {
    for (const t of trainers) job.push(t, v, 1, ones());
    // A checkpoint captures the version current when it runs: let each one run before going on.
    if ((v + 1) % every === 0) await checkpointed(v + 1);
  }
  expect(job.version).toBe(steps);
  return shard;
}

/** Waits until the background checkpoints reached `version`. */
async function checkpointed(version: number): Promise<void> {
  const meta = join(dir, JOB, CHECKPOINT_METADATA_FILE);
  for (let i = 0; i < 200; i++) {
    if (existsSync(meta) && JSON.parse(await readFile(meta, 'utf8')).version >= version) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`no checkpoint of version ${version}`);
}

const values = async (shard: ParameterShard) =>
  Object.fromEntries((await shard.job(JOB)).read().tensors.map((t) => [t.name, Array.from(t.data)]));

describe('pserver recovery', () => {
  it('pserver recovery - a restarted shard serves its checkpointed parameters at its recorded version', async () => {
    const before = await trained(5);
    await checkpointed(4);
    // The process dies: nothing more is written.
    before.fence();
    expect(readProgressRecord(join(dir, JOB))).toMatchObject({ version: 5, members: [{ trainerId: 't' }] });

    const after = newShard();
    expect(await after.preload([JOB, 'not-here'])).toEqual([JOB]);
    const job = await after.job(JOB);
    expect(job.version).toBe(5);
    // The parameters of version 4: 10 - 4 * 0.5, 20 - 4 * 0.5, 0 - 4 * 0.5.
    expect(await values(after)).toEqual({ w: [8, 18], b: [-2] });
    expect(job.status().members).toEqual(['t']);
    expect(lines.join('\n')).toMatch(
      /resumed at version 5 from .*ckpt-000000000004\.bin \(checkpoint of version 4\); the updates of versions 5\.\.5 .* were lost; 1 member/,
    );
    // Training goes on from version 5; the next step is 6.
    expect(job.push('t', 5, 1, ones())).toEqual({ version: 6, accepted: true });
    expect(readProgressRecord(join(dir, JOB))?.version).toBe(6);
    await after.close();
  });

  it('pserver recovery - the first step after a restart takes the first push; the others are recomputed', async () => {
    const before = await trained(3, ['a', 'b']);
    before.fence();
    const after = newShard();
    await after.preload([JOB]);
    const job = await after.job(JOB);
    expect(job.version).toBe(3);
    // Trainer a's push for version 3 was answered before the crash; a waits for version 4 and
    // will not push again. b's push was cut off and comes again: it alone makes the step.
    expect(job.push('b', 3, 1, ones())).toEqual({ version: 4, accepted: true });
    expect(() => job.push('a', 3, 1, ones())).toThrow(GradientVersionError);
    // From version 4 on, both restored members count again.
    expect(job.push('a', 4, 1, ones())).toEqual({ version: 4, accepted: true });
    expect(job.push('b', 4, 1, ones())).toEqual({ version: 5, accepted: true });
    await after.close();
  });

  it('pserver recovery - a pull for a later version takes the first step after a restart when no push comes', async () => {
    const before = await trained(3, ['a', 'b']);
    before.fence();
    const after = newShard();
    await after.preload([JOB]);
    const job = await after.job(JOB);
    const parameters = await values(after);
    // Both trainers had their pushes for version 3 answered and now wait for version 4.
    job.wants(3);
    expect(job.version).toBe(3);
    const waiting = job.waitForVersion(4, 5_000);
    job.wants(4);
    await waiting;
    expect(job.version).toBe(4);
    expect(await values(after)).toEqual(parameters);
    // From then on, steps wait for the quorum again, and wanting does not step.
    job.wants(5);
    expect(job.version).toBe(4);
    expect(job.push('a', 4, 1, ones())).toEqual({ version: 4, accepted: true });
    expect(job.push('b', 4, 1, ones())).toEqual({ version: 5, accepted: true });
    await after.close();
  });

  it('pserver recovery - a truncated latest checkpoint falls back to the previous one; the version does not go back', async () => {
    const before = await trained(5);
    await checkpointed(4);
    before.fence();
    const latest = join(dir, JOB, checkpointFileName(4));
    await truncate(latest, 30);
    const after = newShard();
    await after.preload([JOB]);
    const job = await after.job(JOB);
    expect(job.version).toBe(5);
    expect(await values(after)).toEqual({ w: [9, 19], b: [-1] });
    const log = lines.join('\n');
    expect(log).toContain(`warn checkpoint ${latest}: truncated or extended`);
    expect(log).toMatch(/falling back to ckpt-000000000002\.bin/);
    expect(log).toMatch(/resumed at version 5 from .*ckpt-000000000002\.bin \(checkpoint of version 2\)/);
    await after.close();
  });

  it('pserver recovery - a job whose checkpoints are all lost is initialised again from its recorded version', async () => {
    const before = await trained(5);
    await checkpointed(4);
    before.fence();
    for (const f of await readdir(join(dir, JOB))) if (f !== PROGRESS_RECORD_FILE) await unlink(join(dir, JOB, f));
    const after = newShard();
    expect(await after.preload([JOB])).toEqual([]);
    await expect(after.job(JOB)).rejects.toBeInstanceOf(JobUnknownToShardError);
    const election = await after.beginInit({
      jobId: JOB,
      trainerId: 'x',
      specJson: spec(),
      params: PARAMS,
      shardCount: 1,
    });
    expect(election).toMatchObject({ elected: true, initialized: false });
    (await after.job(JOB)).initTensors('x', [
      { name: 'w', shape: [2], value: Float32Array.of(1, 1) },
      { name: 'b', shape: [1], value: Float32Array.of(1) },
    ]);
    expect(await after.finishInit(JOB, 'x')).toBe(5);
    expect(lines.join('\n')).toMatch(/no checkpoint; once initialised again it goes on from version 5/);
    await after.close();
  });

  it('pserver recovery - only damaged checkpoints leave the job to the election, with an error line', async () => {
    const before = await trained(2, ['t'], spec({ checkpoint: { everySteps: 100 } }));
    await before.close();
    const dataFile = join(dir, JOB, checkpointFileName(2));
    await truncate(dataFile, 10);
    await truncate(join(dir, JOB, checkpointFileName(0)), 10);
    const after = newShard();
    expect(await after.preload([JOB])).toEqual([]);
    expect(lines.join('\n')).toMatch(
      /error job job-1: checkpoint .*: no intact checkpoint: .*; the job will be initialised again/,
    );
  });

  it('pserver recovery - a shard that lost its lease writes nothing more', async () => {
    const shard = await trained(2);
    await checkpointed(2);
    shard.fence();
    const job = await shard.job(JOB);
    job.push('t', 2, 1, ones());
    expect(job.version).toBe(3);
    expect(readProgressRecord(join(dir, JOB))?.version).toBe(2);
    await expect(shard.save(JOB)).rejects.toBeInstanceOf(CheckpointError);
    await shard.close();
    expect(JSON.parse(await readFile(join(dir, JOB, CHECKPOINT_METADATA_FILE), 'utf8')).version).toBe(2);
  });

  it('pserver recovery - a stopped job is checkpointed and dropped, and comes back from disk when it runs again', async () => {
    const shard = await trained(3, ['t'], spec({ checkpoint: { everySteps: 100 } }));
    await shard.retire(JOB);
    expect(shard.jobIds()).toEqual([]);
    await expect(shard.job(JOB)).rejects.toBeInstanceOf(JobUnknownToShardError);
    shard.reinstate(JOB);
    expect((await shard.job(JOB)).version).toBe(3);
    await shard.close();
  });
});

/** Addresses that a test can move, as the pservers bucket does when a shard restarts. */
class MovableDirectory implements ShardDirectory {
  private readonly listeners = new Set<(shard: number, address: string | undefined) => void>();
  constructor(private readonly addresses: string[]) {}
  get shardCount(): number {
    return this.addresses.length;
  }
  address(shard: number): string | undefined {
    return this.addresses[shard];
  }
  async waitForAddress(shard: number): Promise<string> {
    return this.addresses[shard];
  }
  onChange(listener: (shard: number, address: string | undefined) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
  move(shard: number, address: string): void {
    this.addresses[shard] = address;
    for (const l of this.listeners) l(shard, address);
  }
  close(): void {}
}

describe('pserver recovery over gRPC', () => {
  const MODEL: ParamInfo[] = [
    { name: 'a', shape: [3] },
    { name: 'b', shape: [3] },
  ];
  const grads = (): TensorLike[] =>
    MODEL.map((p) => ({ name: p.name, shape: p.shape, data: Float32Array.of(1, 1, 1) }));
  let shards: RunningShard[] = [];

  afterEach(async () => {
    await Promise.all(shards.map((s) => s.stop()));
    shards = [];
  });

  it('pserver recovery - a push cut off by a shard restart is sent again and taken; training goes on', async () => {
    const start = (k: number) => startShard({ shard: k, dataDir: join(dir, `shard-${k}`), logger });
    shards = [await start(0), await start(1)];
    const directory = new MovableDirectory(shards.map((s) => s.address));
    const client = new ShardedPserverClient({
      jobId: JOB,
      trainerId: 't',
      params: MODEL,
      directory,
      unavailableRetryMs: 20_000,
    });
    await client.initialize(spec({ checkpoint: { everySteps: 1 } }), () =>
      MODEL.map((p) => ({ name: p.name, shape: p.shape, data: new Float32Array(3) })),
    );
    await client.join();
    expect((await client.pushGradients(0, 1, grads())).versions).toEqual([1, 1]);

    // Shard 1 dies: it stops answering at once and writes nothing more.
    shards[1].shard.fence();
    await shards[1].server.stop(0);
    const push = client.pushGradients(1, 1, grads());
    await new Promise((r) => setTimeout(r, 300));
    const restarted = await start(1);
    expect(await restarted.shard.preload([JOB])).toEqual([JOB]);
    shards[1] = restarted;
    directory.move(1, restarted.address);

    const outcome = await push;
    expect(outcome).toMatchObject({ versions: [2, 2], stale: [] });
    const pulled = await client.pullParams(2);
    expect(pulled).toMatchObject({ versions: [2, 2], consistent: true });
    expect(await client.pushGradients(2, 1, grads())).toMatchObject({ versions: [3, 3], stale: [] });
    client.close();
  });
});
