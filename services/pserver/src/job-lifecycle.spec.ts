import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startNatsServer, type ServerProcess } from '#libs/local-cluster';
import {
  connectNats,
  encodeJson,
  openBuckets,
  type Buckets,
  type JobRecord,
  type NatsConnection,
} from '#libs/messaging';
import { DataType } from '#libs/pserver-protocol';
import { JobUnknownToShardError } from './errors.js';
import type { LineLogger } from '#libs/logging';
import { JobLifecycle } from './job-lifecycle.js';
import { ParameterShard } from './parameter-shard.js';

const PARAMS = [{ name: 'w', dtype: DataType.FLOAT32, shape: [2] }];
const SPEC = JSON.stringify({ optimizer: { type: 'sgd', learningRate: 0.5 }, checkpoint: { everySteps: 1000 } });

let dir: string;
let nats: ServerProcess;
let nc: NatsConnection;
let buckets: Buckets;
const lines: string[] = [];
const logger: LineLogger = { log: (m) => lines.push(m), warn: (m) => lines.push(m), error: (m) => lines.push(m) };

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tributary-lifecycle-'));
  nats = await startNatsServer({ dir: join(dir, 'nats') });
  nc = await connectNats(nats.url, 'job lifecycle test');
  buckets = await openBuckets(nc);
});

afterAll(async () => {
  await nc?.drain();
  await nats?.stop();
  await rm(dir, { recursive: true, force: true });
});

async function put(jobId: string, state: JobRecord['state']): Promise<void> {
  const record: JobRecord = { jobId, state, spec: {}, epoch: 0, startedAt: '2026-01-01T00:00:00Z' };
  await buckets.jobs.put(jobId, encodeJson(record));
}

async function until(condition: () => boolean | Promise<boolean>): Promise<void> {
  while (!(await condition())) await new Promise((r) => setTimeout(r, 10));
}

describe('job lifecycle', () => {
  it('job lifecycle - live jobs are listed at start; a stopped job is checkpointed, then dropped; a rerun comes back; a removed one loses its checkpoints', async () => {
    await put('live-a', 'running');
    await put('live-b', 'waiting');
    await put('done-c', 'stopped');
    await buckets.jobs.put('garbage', new TextEncoder().encode('not json'));

    const shard = new ParameterShard({ shard: 0, dataDir: join(dir, 'data'), logger });
    const lifecycle = new JobLifecycle(nc, buckets.jobs, shard, { logger, retentionMs: 100 });
    expect((await lifecycle.start()).sort()).toEqual(['live-a', 'live-b']);

    await shard.beginInit({ jobId: 'live-a', trainerId: 't', specJson: SPEC, params: PARAMS, shardCount: 1 });
    const job = await shard.job('live-a');
    job.initTensors('t', [{ name: 'w', shape: [2], value: Float32Array.of(1, 1) }]);
    await shard.finishInit('live-a', 't');
    for (let v = 0; v < 3; v++) job.push('t', v, 1, new Map([['w', Float32Array.of(1, 1)]]));

    await put('live-a', 'stopped');
    const meta = join(dir, 'data', 'live-a', 'checkpoint.json');
    await until(async () => JSON.parse(await readFile(meta, 'utf8')).version === 3);
    await until(() => shard.jobIds().length === 0);
    await expect(shard.job('live-a')).rejects.toBeInstanceOf(JobUnknownToShardError);

    await put('live-a', 'running');
    await until(async () => (await shard.job('live-a').catch(() => undefined))?.version === 3);

    await put('live-a', 'stopped');
    await buckets.jobs.purge('live-a');
    // The log line follows the removal's completion; the directory can vanish (in the thread
    // pool) a moment before that, so the line is what the test waits for.
    await until(() => lines.includes('job live-a: past its retention; checkpoints removed'));
    expect(existsSync(join(dir, 'data', 'live-a'))).toBe(false);
    expect(shard.jobIds()).toEqual([]);
    lifecycle.stop();
    await shard.close();
  });
});
