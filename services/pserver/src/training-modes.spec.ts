import { DataType } from '#libs/pserver-protocol';
import { GradientVersionError, InvalidRequestError } from './errors.js';
import { JobShard, type JobShardHooks } from './job-shard.js';
import { parseJobSettings } from './job-settings.js';

/*
 * The pserver side of each training mode, on one job shard: when a push is taken, when a step
 * happens and what it does to the parameters (sgd, learning rate 0.5, w starts at [1, 2]).
 */

const LR = 0.5;
const PARAMS = [{ name: 'w', dtype: DataType.FLOAT32, shape: [2] }];

/** A job shard initialised with w = [1, 2], `members` counted from version 0. */
function makeJob(training: object, members: string[] = [], trainers: object = {}, hooks: JobShardHooks = {}) {
  const specJson = JSON.stringify({ optimizer: { type: 'sgd', learningRate: LR }, training, trainers });
  const job = new JobShard({ jobId: 'job-m', shard: 0, specJson, settings: parseJobSettings(specJson), hooks });
  job.setParamList(PARAMS, 1);
  for (const m of members) job.join(m);
  job.beginInit('init');
  job.initTensors('init', [{ name: 'w', shape: [2], value: Float32Array.of(1, 2) }]);
  job.finishInit('init');
  return job;
}

const w = (a: number, b: number) => new Map([['w', Float32Array.of(a, b)]]);
const values = (job: JobShard) => Array.from(job.read().tensors[0]!.data);

describe('training modes on a job shard', () => {
  it('sync with backupTrainers - the step is taken without the slowest member; its late push is refused as stale', () => {
    const job = makeJob({ mode: 'sync', backupTrainers: 1 }, ['a', 'b', 'c'], { min: 3 });
    expect(job.push('a', 0, 1, w(2, 2))).toEqual({ version: 0, accepted: true });
    expect(job.push('b', 0, 1, w(4, 4))).toEqual({ version: 1, accepted: true });
    expect(values(job)).toEqual([1 - LR * 3, 2 - LR * 3]);
    expect(() => job.push('c', 0, 1, w(100, 100))).toThrow(GradientVersionError);
    expect(values(job)).toEqual([1 - LR * 3, 2 - LR * 3]);
    // A member leaving mid-round: the one that pushed is all but one of the members left.
    job.push('a', 1, 1, w(0, 0));
    expect(job.version).toBe(1);
    job.leave('b');
    expect(job.version).toBe(2);
  });

  it('async with stalenessAware - a gradient s versions old is applied with learning rate lr / s', () => {
    const job = makeJob({ mode: 'async', stalenessAware: true });
    job.push('a', 0, 1, w(1, 1));
    job.push('a', 1, 1, w(1, 1));
    expect(values(job)).toEqual([1 - 2 * LR, 2 - 2 * LR]);
    // Computed on version 0, the shard at 2: half the learning rate.
    job.push('b', 0, 1, w(1, 1));
    expect(values(job)).toEqual([1 - 2.5 * LR, 2 - 2.5 * LR]);
    expect(job.version).toBe(3);
    const plain = makeJob({ mode: 'async' });
    plain.push('a', 0, 1, w(1, 1));
    plain.push('b', 0, 1, w(1, 1));
    expect(values(plain)).toEqual([1 - 2 * LR, 2 - 2 * LR]);
  });

  it('ssp - a trainer runs ahead by up to maxStaleness versions; the steps follow once the slowest pushes', () => {
    const job = makeJob({ mode: 'ssp', maxStaleness: 2 }, ['fast', 'slow']);
    job.push('fast', 0, 1, w(0, 0));
    job.push('slow', 0, 1, w(0, 0));
    expect(job.version).toBe(1);
    expect(job.nextWanted(1, 1)).toBe(0);
    // fast pushes for 1, 2 and 3 (parameters at most 2 versions behind), not 4.
    for (const v of [1, 2, 3]) expect(job.push('fast', v, 1, w(v, v))).toEqual({ version: 1, accepted: true });
    expect(() => job.push('fast', 4, 1, w(0, 0))).toThrow(/version 4 is ahead of shard version 1/);
    expect(job.status().pendingPushes).toBe(1);
    job.push('slow', 1, 1, w(3, 3));
    expect(job.version).toBe(2);
    expect(values(job)).toEqual([1 - LR * 2, 2 - LR * 2]);
    // slow leaves: versions 2 and 3 step with fast's gradients alone.
    job.leave('slow');
    expect(job.version).toBe(4);
    expect(values(job)).toEqual([1 - LR * 7, 2 - LR * 7]);
    expect(() => job.push('fast', 3, 1, w(0, 0))).toThrow(/stale gradient: version 3 is older than shard version 4/);
  });

  it('ssp with maxStaleness 0 - takes pushes for the open version only, as sync', () => {
    const job = makeJob({ mode: 'ssp', maxStaleness: 0 }, ['a']);
    expect(() => job.push('a', 1, 1, w(0, 0))).toThrow(GradientVersionError);
    job.push('a', 0, 1, w(1, 1));
    expect(job.nextWanted(0, 1)).toBe(1);
  });

  it('local with localSync - the deltas of a round are averaged by samples and added', () => {
    const job = makeJob({ mode: 'local', localSync: true }, ['a', 'b']);
    job.push('a', 0, 1, w(0, 0));
    job.push('b', 0, 1, w(0, 0));
    expect(job.version).toBe(1);
    job.push('a', 1, 1, w(4, 0));
    expect(job.version).toBe(1);
    job.push('b', 1, 3, w(0, 4));
    expect(job.version).toBe(2);
    expect(values(job)).toEqual([1 + 1, 2 + 3]);
    expect(job.nextWanted(1, 2)).toBe(2);
    expect(() => job.push('a', 1, 1, w(0, 0))).toThrow(GradientVersionError);
  });

  it('local with roundEnd first - the first delta of a round that waits for others is told once; a round of one is not', () => {
    const told: number[] = [];
    const hooks: JobShardHooks = { onRoundWaiting: (_job, version) => told.push(version) };
    const job = makeJob({ mode: 'local', roundEnd: 'first' }, ['a', 'b'], {}, hooks);
    job.push('a', 0, 4, w(1, 1));
    expect(told).toEqual([0]);
    // The same trainer again (ignored), then the round's last delta: nothing more to tell.
    job.push('a', 0, 4, w(1, 1));
    job.push('b', 0, 1, w(6, 6));
    expect(told).toEqual([0]);
    expect(job.version).toBe(1);
    // Deltas of 4 and 1 examples: averaged by examples, as with rounds of equal steps.
    expect(values(job)).toEqual([1 + 2, 2 + 2]);
    job.push('b', 1, 2, w(0, 0));
    expect(told).toEqual([0, 1]);
    const alone = makeJob({ mode: 'local', roundEnd: 'first' }, ['a'], {}, hooks);
    alone.push('a', 0, 4, w(1, 1));
    expect(alone.version).toBe(1);
    expect(told).toEqual([0, 1]);
    const plain = makeJob({ mode: 'local' }, ['a', 'b'], {}, hooks);
    plain.push('a', 0, 4, w(1, 1));
    expect(told).toEqual([0, 1]);
  });

  it('local without localSync - each delta is added as it comes, whatever its version', () => {
    const job = makeJob({ mode: 'local', localSync: false });
    job.push('a', 0, 4, w(1, -1));
    job.push('b', 0, 1, w(0.5, 0.5));
    expect(job.version).toBe(2);
    expect(values(job)).toEqual([2.5, 1.5]);
    expect(job.nextWanted(0, 2)).toBe(2);
    expect(() => job.push('a', 3, 1, w(0, 0))).toThrow(/ahead/);
  });

  it('local with elasticAlpha - a round moves the center by the sum of the elastic differences', () => {
    const job = makeJob({ mode: 'local', localSync: true, elasticAlpha: 0.25 }, ['a', 'b']);
    job.push('a', 0, 8, w(1, 0));
    job.push('b', 0, 2, w(1, 2));
    expect(values(job)).toEqual([1 + 2, 2 + 2]);
    const async = makeJob({ mode: 'local', localSync: false, elasticAlpha: 0.25 });
    async.push('a', 0, 8, w(1, 0));
    expect(values(async)).toEqual([2, 2]);
  });

  it.each([
    ['ssp', { mode: 'ssp', maxStaleness: 1 }],
    ['local', { mode: 'local', localSync: true }],
    ['local async', { mode: 'local', localSync: false }],
    ['async', { mode: 'async', stalenessAware: true }],
  ])('%s - a checkpoint restores the shard, which trains on as the original', (_name, training) => {
    const job = makeJob(training, ['a']);
    job.push('a', 0, 1, w(1, -1));
    job.push('a', 1, 1, w(0.5, 0.5));
    const twin = JobShard.fromCheckpoint(
      job.capture(),
      { shard: 0, settings: job.settings },
      {
        version: job.version,
        members: job.members(),
      },
    );
    expect(twin.version).toBe(job.version);
    expect(values(twin)).toEqual(values(job));
    // The recovery step of a job that steps by rounds takes the first push at once.
    job.push('a', 2, 1, w(2, 2));
    twin.push('a', 2, 1, w(2, 2));
    expect(twin.version).toBe(job.version);
    expect(values(twin)).toEqual(values(job));
  });

  it('job settings - the fields of other modes are ignored, bad ones of the mode named', () => {
    const settings = parseJobSettings(JSON.stringify({ training: { mode: 'async', maxStaleness: 'x' } }));
    expect(settings).toMatchObject({ mode: 'async', maxStaleness: 0, stalenessAware: false, backupTrainers: 0 });
    expect(() => parseJobSettings(JSON.stringify({ training: { mode: 'ssp', maxStaleness: -1 } }))).toThrow(
      InvalidRequestError,
    );
    expect(() => parseJobSettings(JSON.stringify({ training: { mode: 'bsp' } }))).toThrow(
      /expected one of sync, async, ssp, local/,
    );
    expect(parseJobSettings(JSON.stringify({ training: { mode: 'local' } }))).toMatchObject({
      localSync: true,
      elastic: false,
      firstEndsRound: false,
    });
    expect(parseJobSettings(JSON.stringify({ training: { mode: 'local', roundEnd: 'first' } })).firstEndsRound).toBe(
      true,
    );
    expect(() => parseJobSettings(JSON.stringify({ training: { mode: 'local', roundEnd: 'last' } }))).toThrow(
      /spec_json\.training\.roundEnd.*"steps" or "first"/,
    );
  });
});
