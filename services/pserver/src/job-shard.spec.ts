import fc from 'fast-check';
import { DataType } from '#libs/pserver-protocol';
import {
  AlreadyInitializedError,
  GradientVersionError,
  IncompleteInitError,
  InitLeaseHeldError,
  InvalidRequestError,
  InvalidTensorError,
  NotInitializedError,
  ShardClosingError,
  SnapshotNotRetainedError,
  WaitTimeoutError,
} from './errors.js';
import {
  createOptimizerState,
  loadSimdKernelBackend,
  resolveLearningRateSchedule,
  scheduledLearningRate,
} from '#libs/optimizer';
import { KernelHeap } from '#libs/wasm-simd';
import { decodeCheckpoint, encodeCheckpoint } from './checkpoint.js';
import { JobShard } from './job-shard.js';
import { parseJobSettings } from './job-settings.js';

const f32 = DataType.FLOAT32;
const PARAMS = [
  { name: 'w', dtype: f32, shape: [2] },
  { name: 'b', dtype: f32, shape: [1] },
];

function makeJob(spec: object = {}, shard = 0, shardCount = 1, clock = { t: 0 }, params = PARAMS) {
  const versions: number[] = [];
  const snapshots: number[] = [];
  const specJson = JSON.stringify({ optimizer: { type: 'sgd', learningRate: 0.5 }, ...spec });
  const job = new JobShard({
    jobId: 'job-1',
    shard,
    specJson,
    settings: parseJobSettings(specJson),
    initLeaseMs: 1000,
    now: () => clock.t,
    hooks: { onVersion: (_, v) => versions.push(v), onSnapshot: (_, v) => snapshots.push(v) },
  });
  job.setParamList(params, shardCount);
  return { job, versions, snapshots, clock };
}

function initialize(job: JobShard, trainer = 'init') {
  expect(job.beginInit(trainer).elected).toBe(true);
  job.initTensors(trainer, [
    { name: 'w', shape: [2], value: Float32Array.of(1, 2) },
    { name: 'b', shape: [1], value: Float32Array.of(0) },
  ]);
  job.finishInit(trainer);
}

const grads = (w: [number, number], b: number) =>
  new Map([
    ['w', Float32Array.from(w)],
    ['b', Float32Array.of(b)],
  ]);

const values = (job: JobShard) => Object.fromEntries(job.read().tensors.map((t) => [t.name, Array.from(t.data)]));

describe('job shard', () => {
  it('job shard - the first caller is elected; others wait until the lease expires', () => {
    const { job, clock } = makeJob();
    expect(job.beginInit('a')).toMatchObject({ elected: true, initialized: false, leaseHolder: 'a' });
    expect(job.beginInit('b')).toMatchObject({ elected: false, leaseHolder: 'a' });
    clock.t = 900;
    expect(job.beginInit('a').elected).toBe(true); // renews until 1900
    clock.t = 1800;
    expect(job.beginInit('b').elected).toBe(false);
    clock.t = 2000;
    expect(job.beginInit('b')).toMatchObject({ elected: true, leaseHolder: 'b' });
    expect(() => job.initTensors('a', [])).toThrow(InitLeaseHeldError);
    expect(() => job.finishInit('a')).toThrow(/does not hold the init lease \(held by b\)/);
  });

  it('job shard - other shards never elect, and accept init from anyone', () => {
    const { job } = makeJob({}, 1, 2);
    expect(job.beginInit('a').elected).toBe(false);
    // With 2 shards, shard 1 owns only "b".
    expect(() => job.initTensors('z', [{ name: 'w', shape: [2], value: new Float32Array(2) }])).toThrow(
      /"w" is not a parameter of shard 1/,
    );
    job.initTensors('z', [{ name: 'b', shape: [1], value: Float32Array.of(4) }]);
    expect(job.finishInit('z')).toBe(0);
    expect(values(job)).toEqual({ b: [4] });
  });

  it('job shard - a non-finite value anywhere is refused at its index; every finite float32 is taken', () => {
    const finite = fc.float({ noNaN: true, noDefaultInfinity: true });
    const bad = fc.constantFrom(Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY);
    fc.assert(
      fc.property(fc.array(finite, { minLength: 1, maxLength: 23 }), fc.nat(), bad, (values, at, v) => {
        const shape = [values.length];
        const { job } = makeJob({}, 0, 1, { t: 0 }, [{ name: 'v', dtype: f32, shape }]);
        job.beginInit('a');
        const tensor = Float32Array.from(values);
        job.initTensors('a', [{ name: 'v', shape, value: tensor }]);
        const i = at % values.length;
        tensor[i] = v;
        expect(() => job.initTensors('a', [{ name: 'v', shape, value: tensor }])).toThrow(
          new RegExp(`non-finite value ${v} at index ${i}$`),
        );
      }),
    );
  });

  it('job shard - init refuses wrong shapes, dtypes, missing tensors and non-finite values', () => {
    const { job } = makeJob();
    job.beginInit('a');
    expect(() => job.expectInitTensor('w', DataType.FLOAT64, [2])).toThrow(/expected float32, got float64/);
    expect(() => job.expectInitTensor('w', f32, [3])).toThrow(/expected shape \[2\], got \[3\]/);
    expect(() => job.initTensors('a', [{ name: 'w', shape: [2], value: Float32Array.of(1, NaN) }])).toThrow(
      /non-finite value NaN at index 1/,
    );
    job.initTensors('a', [{ name: 'w', shape: [2], value: Float32Array.of(1, 2) }]);
    expect(() => job.finishInit('a')).toThrow(IncompleteInitError);
    expect(() => job.finishInit('a')).toThrow(/missing parameters: b/);
    expect(job.initialized).toBe(false);
  });

  it('job shard - a different parameter list than before is refused', () => {
    const { job } = makeJob();
    expect(() => job.setParamList([{ name: 'w', dtype: f32, shape: [3] }, PARAMS[1]], 1)).toThrow(InvalidRequestError);
    expect(() => job.setParamList(PARAMS, 0)).toThrow(/shard_count/);
    const other = makeJob().job;
    expect(() => other.setParamList([{ name: 'x', dtype: DataType.INT32, shape: [1] }], 1)).toThrow(
      /only float32 parameters are trainable/,
    );
  });

  it('job shard - sync: one step per version once the quorum pushed, then stale versions are refused', () => {
    const { job, versions } = makeJob();
    initialize(job);
    expect(versions).toEqual([0]);
    job.join('a');
    job.join('b');
    // Nobody counts at version 0 (they joined at 0), so the first push steps at once.
    expect(job.push('a', 0, 1, grads([1, 1], 1))).toEqual({ version: 1, accepted: true });
    expect(values(job)).toEqual({ w: [0.5, 1.5], b: [-0.5] });
    expect(() => job.push('b', 0, 1, grads([1, 1], 1))).toThrow(GradientVersionError);
    expect(() => job.push('b', 0, 1, grads([1, 1], 1))).toThrow(
      'stale gradient: version 0 is older than shard version 1',
    );
    expect(job.push('a', 1, 1, grads([1, 0], 0))).toEqual({ version: 1, accepted: true });
    expect(job.push('a', 1, 1, grads([9, 9], 9))).toEqual({ version: 1, accepted: false });
    expect(job.push('b', 1, 3, grads([-1, 4], 0))).toEqual({ version: 2, accepted: true });
    // Average weighted by samples: w' = w - 0.5 * ([1,0]*1 + [-1,4]*3) / 4.
    expect(values(job)).toEqual({ w: [0.5 + 0.25, 1.5 - 1.5], b: [-0.5] });
    expect(versions).toEqual([0, 1, 2]);
    expect(() => job.push('a', 5, 1, grads([0, 0], 0))).toThrow('gradient version 5 is ahead of shard version 2');
  });

  it('job shard - sync: joining again from a later version takes a member out of the open step, never back in', () => {
    const { job, versions } = makeJob();
    initialize(job);
    job.join('a');
    expect(job.push('a', 0, 1, grads([0, 0], 0)).version).toBe(1);
    // b joins at version 1: counted from 2, so version 1 steps on a's push alone.
    expect(job.join('b')).toEqual({ version: 1, countedFrom: 2 });
    expect(job.push('a', 1, 1, grads([0, 0], 0)).version).toBe(2);
    // Version 2 waits for b...
    expect(job.push('a', 2, 1, grads([1, 1], 1))).toEqual({ version: 2, accepted: true });
    // ...until b says another shard counts it from 3: version 2 steps with a's push.
    expect(job.join('b', 3)).toEqual({ version: 3, countedFrom: 3 });
    expect(values(job)).toEqual({ w: [0.5, 1.5], b: [-0.5] });
    expect(versions).toEqual([0, 1, 2, 3]);
    // An earlier version is not taken back, and version 3 waits for b.
    expect(job.join('b', 2)).toEqual({ version: 3, countedFrom: 3 });
    expect(job.join('b')).toEqual({ version: 3, countedFrom: 3 });
    expect(job.push('a', 3, 1, grads([0, 0], 0))).toEqual({ version: 3, accepted: true });
    expect(job.push('b', 3, 1, grads([0, 0], 0))).toEqual({ version: 4, accepted: true });
    // A newcomer asked to count from a later version than its own.
    expect(job.join('c', 9)).toEqual({ version: 4, countedFrom: 9 });
    expect(() => job.join('c', -1)).toThrow('counted_from_at_least: must be a version (0 or more), got -1');
    expect(() => job.join('c', 1.5)).toThrow(InvalidRequestError);
  });

  it('job shard - a refused push changes nothing', () => {
    const { job } = makeJob();
    initialize(job);
    job.join('a');
    job.join('b');
    job.push('a', 0, 1, grads([0, 0], 0));
    const before = values(job);
    expect(() => job.push('a', 1, 1, new Map([['w', Float32Array.of(1, 1)]]))).toThrow(/missing gradients for: b/);
    expect(() => job.push('a', 1, 1, grads([1, Infinity], 0))).toThrow(InvalidTensorError);
    expect(() => job.push('a', 1, 0, grads([1, 1], 0))).toThrow(/samples/);
    expect(() => job.push('a', 1, 1, new Map([...grads([1, 1], 1), ['zz', Float32Array.of(1)]]))).toThrow(
      /"zz" is not a parameter/,
    );
    expect(() => job.expectGradient('w', f32, [2, 1])).toThrow(/expected shape \[2\], got \[2, 1\]/);
    expect(job.status().pendingPushes).toBe(0);
    expect(values(job)).toEqual(before);
    expect(job.version).toBe(1);
  });

  it('job shard - leaving completes the open step; lapsing members too', () => {
    const { job, clock } = makeJob();
    initialize(job);
    job.join('a');
    job.join('b');
    job.join('c');
    job.push('a', 0, 1, grads([0, 0], 0));
    job.push('a', 1, 1, grads([0, 0], 0));
    expect(job.version).toBe(1);
    job.leave('b');
    expect(job.version).toBe(1);
    clock.t = 10_000;
    job.touch('a');
    expect(job.sweep(5_000)).toEqual(['c']);
    expect(job.version).toBe(2);
    expect(job.status().members).toEqual(['a']);
    // A lapsed member that calls again is back, counted from the next version.
    job.touch('c');
    expect(job.status().members).toEqual(['a', 'c']);
    job.push('a', 2, 1, grads([0, 0], 0));
    expect(job.version).toBe(3);
    job.push('a', 3, 1, grads([0, 0], 0));
    expect(job.version).toBe(3);
    job.push('c', 3, 1, grads([0, 0], 0));
    expect(job.version).toBe(4);
  });

  it('job shard - a member whose step stream was cut lapses after the cut grace unless it calls again', () => {
    const { job, clock } = makeJob();
    initialize(job);
    job.join('a');
    job.join('b');
    job.join('c');
    expect(job.cut('a')).toBe(true);
    expect(job.cut('b')).toBe(true);
    expect(job.cut('x')).toBe(false);
    clock.t = 1_000;
    // b reset its stream and called again; a stayed silent.
    job.touch('b');
    clock.t = 2_001;
    expect(job.sweep(10_000, 2_000)).toEqual(['a']);
    expect(job.status().members).toEqual(['b', 'c']);
    // Without a cut, the member TTL holds.
    clock.t = 9_000;
    expect(job.sweep(10_000, 2_000)).toEqual([]);
    clock.t = 10_001;
    expect(job.sweep(10_000, 2_000)).toEqual(['c']);
  });

  it('job shard - trainers.min holds the step for that many members', () => {
    const { job } = makeJob({ trainers: { min: 2 } });
    job.join('a');
    job.join('b');
    initialize(job);
    job.push('a', 0, 1, grads([0, 0], 0));
    expect(job.version).toBe(0);
    job.push('b', 0, 1, grads([0, 0], 0));
    expect(job.version).toBe(1);
  });

  it('job shard - async: every push is a step, older versions included', () => {
    const { job } = makeJob({ training: { mode: 'async' } });
    initialize(job);
    job.push('a', 0, 1, grads([1, 1], 1));
    job.push('b', 0, 1, grads([1, 1], 1));
    expect(job.version).toBe(2);
    expect(values(job)).toEqual({ w: [0, 1], b: [-1] });
    expect(() => job.push('a', 3, 1, grads([1, 1], 1))).toThrow(/ahead/);
  });

  it('job shard - snapshots every evaluation.everySteps versions, the last two retained', () => {
    const { job, snapshots } = makeJob({ training: { mode: 'async' }, evaluation: { everySteps: 2 } });
    initialize(job);
    for (let v = 0; v < 6; v++) job.push('a', v, 1, grads([1, 0], 0));
    expect(snapshots).toEqual([2, 4, 6]);
    expect(job.snapshotVersions()).toEqual([4, 6]);
    expect(Array.from(job.read(4).tensors[0].data)).toEqual([1 - 0.5 * 4, 2]);
    expect(() => job.read(2)).toThrow(SnapshotNotRetainedError);
    expect(() => job.read(2)).toThrow(/retained: 4, 6/);
  });

  it('job shard - pulls wait for the version, or time out', async () => {
    const { job } = makeJob({ training: { mode: 'async' } });
    const waiting = job.waitForVersion(1, 5_000);
    await expect(job.waitForVersion(0, 0)).rejects.toThrow(WaitTimeoutError);
    initialize(job);
    await expect(job.waitForVersion(0, 0)).resolves.toBeUndefined();
    job.push('a', 0, 1, grads([1, 1], 1));
    await expect(waiting).resolves.toBeUndefined();
    await expect(job.waitForVersion(5, 20)).rejects.toThrow('version 5 not reached within 20 ms (shard is at 1)');
    const aborted = new AbortController();
    const pending = job.waitForVersion(9, 5_000, aborted.signal);
    aborted.abort(new Error('gone'));
    await expect(pending).rejects.toThrow('gone');
    const closing = job.waitForVersion(9, 5_000);
    job.close();
    await expect(closing).rejects.toThrow(/shutting down/);
  });

  it('job shard - calls before init are refused with clear errors', () => {
    const { job } = makeJob();
    expect(() => job.read()).toThrow(NotInitializedError);
    expect(() => job.push('a', 0, 1, grads([0, 0], 0))).toThrow(/not initialised on shard 0/);
    initialize(job);
    expect(() => job.expectInitTensor('w', f32, [2])).toThrow(AlreadyInitializedError);
    expect(job.finishInit('someone')).toBe(0);
    expect(() => job.join('')).toThrow(/trainer_id/);
  });

  it('job shard - a lease holds the values it was given while steps go on; a snapshot lease shares the snapshot', () => {
    const { job } = makeJob({ training: { mode: 'async' }, evaluation: { everySteps: 1 } });
    initialize(job);
    job.push('a', 0, 1, grads([1, 0], 0));
    const lease = job.lease();
    const leased = lease.tensors.map((t) => Array.from(t.data));
    job.push('a', 1, 1, grads([1, 1], 1));
    job.push('a', 2, 1, grads([1, 1], 1));
    expect(lease.version).toBe(1);
    expect(lease.tensors.map((t) => Array.from(t.data))).toEqual(leased);
    lease.release();
    const snapshot = job.lease(2);
    expect(snapshot.version).toBe(2);
    expect(snapshot.tensors.map((t) => Array.from(t.data))).toEqual(job.read(2).tensors.map((t) => Array.from(t.data)));
    snapshot.release();
  });

  it('job shard - snapshots are heap leases: kept through steps, given back when dropped or pulled to the end', () => {
    const kernels = loadSimdKernelBackend(new KernelHeap());
    const specJson = JSON.stringify({
      optimizer: { type: 'sgd', learningRate: 0.5 },
      training: { mode: 'async' },
      evaluation: { everySteps: 2 },
    });
    const job = new JobShard({ jobId: 'job-1', shard: 0, specJson, settings: parseJobSettings(specJson), kernels });
    job.setParamList(PARAMS, 1);
    initialize(job);
    job.push('a', 0, 1, grads([1, 0], 0));
    // Version 1: the values live in the kernel heap; the current set is its only allocation.
    const current = kernels.heap.allocationCount;
    const at = (v: number) => Array.from(job.read(v).tensors[0].data);
    job.push('a', 1, 1, grads([1, 0], 0));
    job.push('a', 2, 1, grads([1, 0], 0));
    job.push('a', 3, 1, grads([1, 0], 0));
    // Versions 2 and 4 are retained (two arrays each), 3 went back when 4 replaced it.
    expect(job.snapshotVersions()).toEqual([2, 4]);
    expect(kernels.heap.allocationCount).toBe(current + 2);
    expect(at(2)).toEqual([1 - 0.5 * 2, 2]);
    expect(job.read(2).tensors.some((t) => kernels.manages(t.data))).toBe(false);
    const pull = job.lease(2);
    for (let v = 4; v < 8; v++) job.push('a', v, 1, grads([1, 0], 0));
    // 2 was dropped from the store but the pull still holds it; 6 and 8 are retained.
    expect(job.snapshotVersions()).toEqual([6, 8]);
    expect(Array.from(pull.tensors[0].data)).toEqual([1 - 0.5 * 2, 2]);
    expect(kernels.heap.allocationCount).toBe(current + 4);
    pull.release();
    expect(kernels.heap.allocationCount).toBe(current + 2);
    expect(at(6)).toEqual([1 - 0.5 * 6, 2]);
    job.dispose();
    expect(kernels.heap.allocationCount).toBe(current - 2);
  });

  it('job shard - once disposed, calls that need the parameters are refused as the shard closing', () => {
    const { job } = makeJob({ training: { mode: 'async' } });
    initialize(job);
    job.dispose();
    expect(() => job.read()).toThrow(ShardClosingError);
    expect(() => job.lease()).toThrow(ShardClosingError);
    expect(() => job.capture()).toThrow(ShardClosingError);
    expect(() => job.push('a', 0, 1, grads([1, 1], 1))).toThrow(ShardClosingError);
    expect(job.version).toBe(0);
  });

  it.each([
    ['adam', { type: 'adam', learningRate: 0.1 }, 2],
    ['adagrad', { type: 'adagrad', learningRate: 0.1, initialAccumulatorValue: 0.5 }, 1],
    ['centered rmsprop', { type: 'rmsprop', learningRate: 0.1, momentum: 0.5, centered: true }, 3],
    ['adamw', { type: 'adamw', learningRate: 0.1, weightDecay: 0.1 }, 2],
  ])('job shard - a checkpoint restores version, parameters and optimizer state (%s)', (_name, optimizer, slots) => {
    const { job } = makeJob({ optimizer, training: { mode: 'async' } });
    initialize(job);
    job.push('a', 0, 1, grads([1, -1], 2));
    job.push('a', 1, 1, grads([0.5, 0.5], 1));
    const data = decodeCheckpoint(encodeCheckpoint(job.capture()), 'test');
    expect(data.tensors.map((t) => t.state.length)).toEqual([slots, slots]);
    const twin = JobShard.fromCheckpoint(data, { shard: 0, settings: job.settings });
    expect(twin.version).toBe(2);
    expect(twin.initialized).toBe(true);
    job.push('a', 2, 1, grads([3, 1], -1));
    twin.push('a', 2, 1, grads([3, 1], -1));
    expect(values(twin)).toEqual(values(job));
  });

  it('job shard - the learning rate follows the schedule by version: warm-up, then step decay', () => {
    const { job } = makeJob({
      optimizer: { type: 'sgd', learningRate: 0.4, schedule: { type: 'step', every: 2, factor: 0.5, warmupSteps: 2 } },
      training: { mode: 'async' },
    });
    initialize(job);
    const w: number[] = [];
    for (let v = 0; v < 6; v++) {
      job.push('a', v, 1, grads([1, 0], 0));
      w.push(values(job).w[0]);
    }
    // Rates by version: 0.2, 0.4 (warm-up), 0.4, 0.4, 0.2, 0.2.
    const expected = [0.8, 0.4, 0, -0.4, -0.6, -0.8];
    w.forEach((got, i) => expect(got).toBeCloseTo(expected[i], 6));
  });

  it.each([
    ['nesterov momentum', { type: 'momentum', learningRate: 0.1, useNesterov: true, weightDecay: 0.01 }],
    ['adagrad', { type: 'adagrad', learningRate: 0.1, weightDecay: 0.01 }],
    ['rmsprop', { type: 'rmsprop', learningRate: 0.01, momentum: 0.9 }],
    ['centered rmsprop', { type: 'rmsprop', learningRate: 0.01, centered: true, weightDecay: 0.1 }],
    ['adamw', { type: 'adamw', learningRate: 0.05, weightDecay: 0.1 }],
  ])('job shard - %s with a cosine schedule steps as its kernel does at the scheduled rates', (_name, optimizer) => {
    const schedule = { type: 'cosine', steps: 4, minLearningRate: 0.001, warmupSteps: 1 };
    const { job } = makeJob({ optimizer: { ...optimizer, schedule }, training: { mode: 'async' } });
    initialize(job);
    const { kernel, hyper } = job.settings;
    const resolved = resolveLearningRateSchedule(schedule, hyper.learningRate);
    const w = Float32Array.of(1, 2);
    const state = createOptimizerState(kernel, 2, hyper);
    const pushed: [number, number][] = [
      [1, -1],
      [0.5, 2],
      [-3, 0.25],
      [1, 1],
      [0, -2],
      [2, 0.5],
    ];
    pushed.forEach((g, v) => {
      job.push('a', v, 1, grads(g, 0));
      const learningRate = scheduledLearningRate(hyper.learningRate, resolved, v);
      kernel.apply(w, Float32Array.from(g), state, { ...hyper, learningRate }, v + 1);
    });
    const got = values(job).w;
    expect(got[0]).toBeCloseTo(w[0], 5);
    expect(got[1]).toBeCloseTo(w[1], 5);
    expect(got).not.toEqual([1, 2]);
  });

  it('job shard - optimizer settings a kernel refuses are an invalid request naming the field', () => {
    expect(() =>
      parseJobSettings(
        JSON.stringify({ optimizer: { type: 'sgd', learningRate: 0.1, schedule: { type: 'step', every: 0 } } }),
      ),
    ).toThrow(/spec_json.optimizer.*optimizer.schedule.every = 0: must be an integer >= 1/);
    expect(() => parseJobSettings(JSON.stringify({ optimizer: { type: 'momentum', useNesterov: 'yes' } }))).toThrow(
      /optimizer.useNesterov = "yes": expected true or false/,
    );
    expect(() => parseJobSettings(JSON.stringify({ optimizer: { type: 'rmsprop', decay: 1.5 } }))).toThrow(
      /optimizer.decay = 1.5: must be in \[0, 1\)/,
    );
  });
});
