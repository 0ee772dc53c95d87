import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DataType } from '#libs/pserver-protocol';
import type { LineLogger } from '#libs/logging';
import { ParameterShard, type ParameterShardOptions } from './parameter-shard.js';

const JOB = 'job-1';
const PARAMS = [{ name: 'w', dtype: DataType.FLOAT32, shape: [2] }];
const gradient = () => new Map([['w', Float32Array.of(1, 1)]]);

/** The directories the tests' shards wrote into, removed after each test. */
const dirs: string[] = [];
afterEach(async () => {
  await Promise.all(dirs.splice(0).map((dir) => rm(dir, { recursive: true, force: true })));
});

/** The lines a shard logged, with their level. */
let lines: string[];

/** A shard with trainers `t` and `others` in a job of `training`, initialised at version 0. */
async function started(
  training: object,
  options: Partial<ParameterShardOptions>,
  others: string[] = [],
): Promise<ParameterShard> {
  const dataDir = await mkdtemp(join(tmpdir(), 'tributary-shard-'));
  dirs.push(dataDir);
  lines = [];
  const logger: LineLogger = {
    log: (m) => lines.push(`log ${m}`),
    warn: (m) => lines.push(`warn ${m}`),
    error: (m) => lines.push(`error ${m}`),
  };
  const shard = new ParameterShard({ shard: 0, dataDir, logger, ...options });
  const specJson = JSON.stringify({
    optimizer: { type: 'sgd', learningRate: 0.5 },
    training,
    evaluation: { everySteps: 1 },
  });
  await shard.beginInit({ jobId: JOB, trainerId: 't', specJson, params: PARAMS, shardCount: 1 });
  const job = await shard.job(JOB);
  job.initTensors('t', [{ name: 'w', shape: [2], value: Float32Array.of(1, 2) }]);
  for (const trainer of ['t', ...others]) job.join(trainer);
  expect(await shard.finishInit(JOB, 't')).toBe(0);
  return shard;
}

const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

describe('pserver parameter shard', () => {
  it('pserver shard - a step is answered before its snapshot is announced', async () => {
    const announced: string[] = [];
    const shard = await started(
      { mode: 'sync' },
      { onSnapshot: (jobId, s, version) => announced.push(`${jobId}/${s}/${version}`) },
    );
    const job = await shard.job(JOB);
    const answered = job.waitForVersion(1, 1_000).then(() => [...announced]);
    expect(job.push('t', 0, 1, gradient())).toEqual({ version: 1, accepted: true });
    // The call that waited for the step sees it before the announcement is made...
    expect(await answered).toEqual([]);
    expect(announced).toEqual([]);
    // ...which comes on the next turn of the event loop.
    await nextTurn();
    expect(announced).toEqual(['job-1/0/1']);
    await shard.close();
  });

  it('pserver shard - a waiting round is announced after the push that opened it returns', async () => {
    const announced: number[] = [];
    const shard = await started(
      { mode: 'local', localSteps: 4, roundEnd: 'first' },
      { onRoundWaiting: (_jobId, _s, version) => announced.push(version) },
      ['u'],
    );
    const job = await shard.job(JOB);
    job.push('t', 0, 1, gradient());
    expect(announced).toEqual([]);
    await nextTurn();
    expect(announced).toEqual([0]);
    await shard.close();
  });

  it('pserver shard - an announcement that fails is logged, and the shard goes on', async () => {
    const shard = await started(
      { mode: 'sync' },
      {
        onSnapshot: () => {
          throw new Error('connection closed');
        },
      },
    );
    const job = await shard.job(JOB);
    job.push('t', 0, 1, gradient());
    await nextTurn();
    expect(lines).toContain('warn job job-1: the snapshot of version 1 was not announced: connection closed');
    expect(job.push('t', 1, 1, gradient())).toEqual({ version: 2, accepted: true });
    await shard.close();
  });
});
