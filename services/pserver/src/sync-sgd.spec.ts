import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ShardedPserverClient, type ParamInfo, type ParamTensor, type TensorLike } from '#libs/pserver-client';
import { startShards, type RunningShard } from '../test/in-process-shards.js';

/** A linear model y = x W + b with two outputs, trained on mean squared error / 2. */
const FEATURES = 6;
const OUTPUTS = 2;
const PARAMS: ParamInfo[] = [
  { name: 'linear/kernel', shape: [FEATURES, OUTPUTS] },
  { name: 'linear/bias', shape: [OUTPUTS] },
];
const STEPS = 5;
const HALF_BATCH = 16;

function mulberry32(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296 - 0.5;
  };
}

const random = mulberry32(42);
const EXAMPLES = Array.from({ length: STEPS * 2 * HALF_BATCH }, () => {
  const x = Array.from({ length: FEATURES }, () => random() * 4);
  const y = [x[0] - 2 * x[3] + 0.5, 3 * x[1] + x[5] - 1].map((v) => v + random() * 0.1);
  return { x, y };
});

/** The gradient of the mean loss over `batch` at `params`, in float64 then float32. */
function gradient(params: readonly ParamTensor[], batch: typeof EXAMPLES): TensorLike[] {
  const [W, b] = [params[0].data, params[1].data];
  const dW = new Float64Array(FEATURES * OUTPUTS);
  const db = new Float64Array(OUTPUTS);
  for (const { x, y } of batch) {
    for (let o = 0; o < OUTPUTS; o++) {
      let pred = b[o];
      for (let f = 0; f < FEATURES; f++) pred += x[f] * W[f * OUTPUTS + o];
      const err = (pred - y[o]) / batch.length;
      db[o] += err;
      for (let f = 0; f < FEATURES; f++) dW[f * OUTPUTS + o] += err * x[f];
    }
  }
  return [
    { name: 'linear/kernel', shape: PARAMS[0].shape, data: Float32Array.from(dW) },
    { name: 'linear/bias', shape: PARAMS[1].shape, data: Float32Array.from(db) },
  ];
}

const initial = (): TensorLike[] => [
  {
    name: 'linear/kernel',
    shape: PARAMS[0].shape,
    data: Float32Array.from({ length: FEATURES * OUTPUTS }, (_, i) => (i % 5) / 10 - 0.2),
  },
  { name: 'linear/bias', shape: PARAMS[1].shape, data: Float32Array.of(0.1, -0.1) },
];

let dir: string;
let shards: RunningShard[];
const clients: ShardedPserverClient[] = [];

function trainer(jobId: string, id: string): ShardedPserverClient {
  const c = ShardedPserverClient.fromAddresses(
    shards.map((s) => s.address),
    { jobId, trainerId: id, params: PARAMS },
  );
  clients.push(c);
  return c;
}

/** One trainer's loop: for each version, pull, compute the gradient of its share, push. */
async function train(c: ShardedPserverClient, share: (step: number) => typeof EXAMPLES): Promise<void> {
  for (let step = 0; step < STEPS; step++) {
    const { tensors, versions, consistent } = await c.pullParams(step);
    expect(consistent).toBe(true);
    expect(versions).toEqual([step, step]);
    const batch = share(step);
    const outcome = await c.pushGradients(versions, batch.length, gradient(tensors, batch));
    expect(outcome.stale).toEqual([]);
  }
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tributary-sync-'));
  shards = await startShards(2, { dataDir: dir });
});

afterAll(async () => {
  for (const c of clients) c.close();
  await Promise.all(shards.map((s) => s.stop()));
  await rm(dir, { recursive: true, force: true });
});

describe('synchronous SGD over two shards', () => {
  it.each([
    ['sgd', { type: 'sgd', learningRate: 0.05 }],
    ['momentum', { type: 'momentum', learningRate: 0.05, momentum: 0.9 }],
    ['adam', { type: 'adam', learningRate: 0.05 }],
  ])(
    'sync sgd - two trainers pushing half batches equal one trainer pushing whole batches (%s)',
    async (name, optimizer) => {
      const batchOf = (step: number) => EXAMPLES.slice(step * 2 * HALF_BATCH, (step + 1) * 2 * HALF_BATCH);

      const solo = trainer(`solo-${name}`, 'solo');
      await solo.initialize(JSON.stringify({ optimizer }), initial);
      await solo.join();
      await train(solo, batchOf);

      const spec = JSON.stringify({ optimizer, trainers: { min: 2 } });
      const [a, b] = [trainer(`pair-${name}`, 'a'), trainer(`pair-${name}`, 'b')];
      await Promise.all([a.initialize(spec, initial, { pollMs: 10 }), b.initialize(spec, initial, { pollMs: 10 })]);
      await Promise.all([a.join(), b.join()]);
      await Promise.all([
        train(a, (step) => batchOf(step).slice(0, HALF_BATCH)),
        train(b, (step) => batchOf(step).slice(HALF_BATCH)),
      ]);

      const [one, two] = await Promise.all([solo.pullParams(STEPS), a.pullParams(STEPS)]);
      expect(one.versions).toEqual([STEPS, STEPS]);
      expect(two.versions).toEqual([STEPS, STEPS]);
      let maxDiff = 0;
      one.tensors.forEach((t, i) =>
        t.data.forEach((v, j) => (maxDiff = Math.max(maxDiff, Math.abs(v - two.tensors[i].data[j])))),
      );
      expect(maxDiff).toBeLessThanOrEqual(1e-6);
      // The model moved: the comparison is not between two untouched copies.
      expect(Math.abs(one.tensors[0].data[0] - (initial()[0].data as Float32Array)[0])).toBeGreaterThan(1e-3);
      // Both parameters live on different shards.
      expect(new Set(PARAMS.map((p) => solo.shardMap.shardOf(p.name))).size).toBe(2);
    },
  );

  it('async sgd - every push is a step, from any trainer', async () => {
    const spec = JSON.stringify({ optimizer: { type: 'sgd', learningRate: 0.05 }, training: { mode: 'async' } });
    const [a, b] = [trainer('async-job', 'a'), trainer('async-job', 'b')];
    await a.initialize(spec, initial);
    await b.initialize(spec, initial);
    const start = await a.pullParams(0);
    const grads = gradient(start.tensors, EXAMPLES.slice(0, 8));
    await Promise.all([a.pushGradients(0, 8, grads), b.pushGradients(0, 8, grads)]);
    const after = await b.pullParams(2);
    expect(after.versions).toEqual([2, 2]);
    const expected =
      start.tensors[1].data[0] - 0.05 * (grads[1].data as Float32Array)[0] - 0.05 * (grads[1].data as Float32Array)[0];
    expect(after.tensors[1].data[0]).toBeCloseTo(expected, 6);
  });
});
