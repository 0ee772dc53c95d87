import * as tf from '@tensorflow/tfjs';
import fc from 'fast-check';
import type { OptimizerSpec } from '#libs/job-spec';
import { prepareWasmBackend } from './backend.js';
import { plainByteConversion } from './byte-features.js';
import { InvalidBatchError, LearnerStateError, ParamMismatchError } from './errors.js';
import { TfjsLearner, type Batch, type PlainTensor } from './learner.js';
import { chooseKernelPath } from './kernels/kernel-path.js';
import type { WasmHeapBackend } from './kernels/wasm-heap.js';
import { localOptimizerFor, tfjsLocalOptimizer, tfjsLocalOptimizerFor } from './local-optimizer.js';
import type { LearnerSpec } from './model-spec.js';

/** Deterministic values in [-1, 1) from a seed (mulberry32). */
function randomValues(seed: number, n: number): Float32Array {
  let s = seed >>> 0;
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    out[i] = ((t ^ (t >>> 14)) >>> 0) / 2 ** 31 - 1;
  }
  return out;
}

const MLP_SPEC: LearnerSpec = {
  model: { preset: 'mlp', hiddenUnits: [16, 8], activation: 'tanh', dropout: 0 },
  layout: { featureShape: [4, 3], featureDtype: 'float32', scale: 1, labelDtype: 'int32', numClasses: 3 },
  seed: 7,
};

const CNN_SPEC: LearnerSpec = {
  model: { preset: 'cnn', filters: [3, 4], kernelSize: 3, denseUnits: 8, activation: 'elu' },
  layout: { featureShape: [8, 8, 1], featureDtype: 'uint8', scale: 1 / 255, labelDtype: 'int32', numClasses: 4 },
  seed: 11,
};

const REGRESSION_SPEC: LearnerSpec = {
  model: { preset: 'mlp', hiddenUnits: [8], activation: 'relu', dropout: 0 },
  layout: { featureShape: [5], featureDtype: 'float32', scale: 1, labelDtype: 'float32' },
  seed: 3,
};

function makeBatch(spec: LearnerSpec, size: number, seed: number): Batch {
  const perExample = spec.layout.featureShape.reduce((a, b) => a * b, 1);
  const features = randomValues(seed, size * perExample);
  const raw = randomValues(seed + 1, size);
  const numClasses = spec.layout.numClasses;
  const labels =
    numClasses === undefined
      ? raw
      : Int32Array.from(raw, (v) => Math.min(numClasses - 1, Math.floor(((v + 1) / 2) * numClasses)));
  return { features, labels, size };
}

/**
 * Initialises a delta-mode `learner` on the MLP, trains it one minibatch from its start, and the
 * same minibatch through a gradient-mode reference learner from the same parameters.
 */
async function firstDeltaAndGradient(learner: TfjsLearner, seed: number) {
  await learner.initialize(MLP_SPEC);
  const reference = new TfjsLearner();
  await reference.initialize(MLP_SPEC);
  const start = await learner.getParams();
  const batch = makeBatch(MLP_SPEC, 8, seed);
  reference.setParams(start);
  await reference.train(batch);
  const gradient = await reference.getUpdate();
  learner.setParams(start);
  await learner.train(batch);
  const delta = await learner.getUpdate();
  return { reference, start, batch, gradient, delta };
}

function sliceBatch(batch: Batch, start: number, end: number): Batch {
  const perExample = batch.features.length / batch.size;
  return {
    features: batch.features.slice(start * perExample, end * perExample),
    labels: batch.labels.slice(start, end),
    size: end - start,
  };
}

function maxAbsDiff(a: PlainTensor[], b: PlainTensor[]): number {
  let max = 0;
  a.forEach((t, i) => {
    expect(b[i]!.name).toBe(t.name);
    for (let j = 0; j < t.data.length; j++) max = Math.max(max, Math.abs(t.data[j]! - b[i]!.data[j]!));
  });
  return max;
}

describe.each(['cpu', 'wasm'])('learner on %s', (backendName) => {
  beforeAll(async () => {
    await prepareWasmBackend();
    expect(await tf.setBackend(backendName)).toBe(true);
  });

  it('learner - two learners with the same seed start from identical params', async () => {
    for (const spec of [MLP_SPEC, CNN_SPEC]) {
      const a = new TfjsLearner();
      const b = new TfjsLearner();
      await a.initialize(spec);
      await b.initialize(spec);
      const pa = await a.getParams();
      const pb = await b.getParams();
      expect(pb.map((p) => p.name)).toEqual(pa.map((p) => p.name));
      expect(maxAbsDiff(pa, pb)).toBe(0);
      a.shutdown();
      b.shutdown();
    }
  });

  it('learner - different seeds give different params', async () => {
    const a = new TfjsLearner();
    const b = new TfjsLearner();
    await a.initialize(MLP_SPEC);
    await b.initialize({ ...MLP_SPEC, seed: 8 });
    expect(maxAbsDiff(await a.getParams(), await b.getParams())).toBeGreaterThan(0);
    a.shutdown();
    b.shutdown();
  });

  it('learner - param names are canonical and do not depend on earlier models', async () => {
    const a = new TfjsLearner();
    await a.initialize(MLP_SPEC);
    const b = new TfjsLearner();
    await b.initialize(MLP_SPEC);
    expect(a.paramNames).toEqual([
      'layers/1/kernel',
      'layers/1/bias',
      'layers/2/kernel',
      'layers/2/bias',
      'layers/3/kernel',
      'layers/3/bias',
    ]);
    expect(b.paramNames).toEqual(a.paramNames);
    a.shutdown();
    b.shutdown();
  });

  it('learner - the gradient on a batch is the sample-weighted mean of the gradients on its parts', async () => {
    for (const spec of [MLP_SPEC, CNN_SPEC, REGRESSION_SPEC]) {
      const learner = new TfjsLearner();
      await learner.initialize(spec);
      const params = await learner.getParams();
      await fc.assert(
        fc.asyncProperty(fc.integer({ min: 2, max: 12 }), fc.integer(), fc.nat(), async (size, seed, cut) => {
          const split = 1 + (cut % (size - 1));
          const batch = makeBatch(spec, size, seed);
          learner.setParams(params);
          await learner.train(batch);
          const whole = await learner.getUpdate();

          learner.setParams(params);
          await learner.train(sliceBatch(batch, 0, split));
          const first = await learner.getUpdate();
          learner.setParams(params);
          await learner.train(sliceBatch(batch, split, size));
          const second = await learner.getUpdate();
          const weighted = first.map((t, i) => ({
            ...t,
            data: t.data.map((v, j) => (v * split + second[i]!.data[j]! * (size - split)) / size),
          }));
          expect(maxAbsDiff(whole, weighted)).toBeLessThanOrEqual(1e-5);

          learner.setParams(params);
          await learner.train(sliceBatch(batch, 0, split));
          await learner.train(sliceBatch(batch, split, size));
          expect(maxAbsDiff(whole, await learner.getUpdate())).toBeLessThanOrEqual(1e-5);
        }),
        { numRuns: 6 },
      );
      learner.shutdown();
    }
  });

  it('learner - 50 train steps leak no tensors', async () => {
    for (const [mode, spec] of [
      ['gradient', CNN_SPEC],
      ['delta', MLP_SPEC],
    ] as const) {
      const before = tf.memory().numTensors;
      const learner = new TfjsLearner({ mode });
      await learner.initialize(spec);
      const params = await learner.getParams();
      const batch = makeBatch(spec, 2, 1);
      let steady = -1;
      for (let step = 0; step < 50; step++) {
        learner.setParams(params);
        await learner.train(batch);
        if (step % 2 === 0) await learner.train(batch);
        await learner.getUpdate();
        if (step % 10 === 0) await learner.evaluate(batch);
        if (step === 0) steady = tf.memory().numTensors;
      }
      expect(tf.memory().numTensors).toBe(steady);
      learner.shutdown();
      expect(tf.memory().numTensors).toBe(before);
    }
  });

  it('learner - applying the updates as SGD lowers the loss', async () => {
    const learner = new TfjsLearner();
    await learner.initialize(MLP_SPEC);
    let params = await learner.getParams();
    const batch = makeBatch(MLP_SPEC, 32, 5);
    const losses: number[] = [];
    for (let step = 0; step < 30; step++) {
      learner.setParams(params);
      losses.push((await learner.train(batch)).loss);
      const update = await learner.getUpdate();
      params = params.map((p, i) => ({ ...p, data: p.data.map((v, j) => v - 0.5 * update[i]!.data[j]!) }));
    }
    expect(losses[29]!).toBeLessThan(losses[0]! * 0.7);
    learner.shutdown();
  });

  it("learner - delta mode with a local optimizer steps with it: Adam's first step", async () => {
    const rate = 0.01;
    const epsilon = 1e-7;
    const learner = new TfjsLearner({
      mode: 'delta',
      localOptimizer: () => tfjsLocalOptimizer(tf.train.adam(rate, 0.9, 0.999, epsilon)),
    });
    const { reference, gradient, delta } = await firstDeltaAndGradient(learner, 11);
    // From zero moments, bias-corrected: m = g, v = g^2, so the step is lr * g / (|g| + epsilon).
    const expected = gradient.map((g) => ({ ...g, data: g.data.map((v) => (-rate * v) / (Math.abs(v) + epsilon)) }));
    expect(maxAbsDiff(delta, expected)).toBeLessThanOrEqual(1e-5);
    expect(
      maxAbsDiff(
        delta,
        gradient.map((g) => ({ ...g, data: g.data.map((v) => -rate * v) })),
      ),
    ).toBeGreaterThan(1e-4);
    learner.shutdown();
    reference.shutdown();
  });

  it("learner - delta mode with the job's optimizer: on wasm the SIMD128 kernel on the heap, stepping as TF.js's own over rounds", async () => {
    const specs: OptimizerSpec[] = [
      { type: 'sgd', learningRate: 0.1, weightDecay: 0 },
      { type: 'momentum', learningRate: 0.05, momentum: 0.9, useNesterov: true, weightDecay: 0 },
      { type: 'adam', learningRate: 0.01, beta1: 0.8, beta2: 0.99, epsilon: 1e-7, weightDecay: 0 },
      { type: 'adagrad', learningRate: 0.05, initialAccumulatorValue: 0.1, epsilon: 1e-7, weightDecay: 0 },
      {
        type: 'rmsprop',
        learningRate: 0.01,
        decay: 0.9,
        momentum: 0.5,
        epsilon: 1e-7,
        centered: false,
        weightDecay: 0,
      },
      // Some gradients here are below 1e-3, where tf.train.rmsprop's own centered form gives NaN.
      { type: 'rmsprop', learningRate: 0.01, decay: 0.9, momentum: 0.5, epsilon: 1e-7, centered: true, weightDecay: 0 },
    ];
    for (const spec of specs) {
      const made = localOptimizerFor(spec);
      expect(made?.path).toBe(backendName === 'wasm' ? 'wasm-simd' : spec.type === 'sgd' ? undefined : 'tfjs');
      made?.dispose();
      const ours = new TfjsLearner({
        mode: 'delta',
        localLearningRate: spec.learningRate,
        localOptimizer: () => localOptimizerFor(spec),
      });
      const theirs = new TfjsLearner({
        mode: 'delta',
        localLearningRate: spec.learningRate,
        localOptimizer: () => tfjsLocalOptimizerFor(spec),
      });
      await ours.initialize(MLP_SPEC);
      await theirs.initialize(MLP_SPEC);
      let params = await ours.getParams();
      // Three rounds of two local steps; the optimizer's state carries from one round to the next.
      for (let round = 0; round < 3; round++) {
        const deltas: PlainTensor[][] = [];
        for (const learner of [ours, theirs]) {
          learner.setParams(params);
          for (let step = 0; step < 2; step++) await learner.train(makeBatch(MLP_SPEC, 8, 30 + round * 2 + step));
          deltas.push(await learner.getUpdate());
        }
        const [mine, reference] = deltas as [PlainTensor[], PlainTensor[]];
        let scale = 0;
        for (const t of reference) for (const v of t.data) scale = Math.max(scale, Math.abs(v));
        expect(scale).toBeGreaterThan(0);
        expect(maxAbsDiff(mine, reference)).toBeLessThanOrEqual(1e-4 * scale);
        params = params.map((p, i) => ({ ...p, data: p.data.map((v, j) => v + reference[i]!.data[j]!) }));
      }
      ours.shutdown();
      theirs.shutdown();
    }
  });

  it('learner - on the plain JavaScript kernel path, local steps run by TF.js and say why', () => {
    const adam = { type: 'adam', learningRate: 0.01, beta1: 0.9, beta2: 0.999, epsilon: 1e-7, weightDecay: 0 } as const;
    if (backendName !== 'wasm') {
      // Off the wasm backend TF.js's optimizer is the way, not a fallback.
      const made = localOptimizerFor(adam);
      expect(made?.path).toBe('tfjs');
      expect(made?.reason).toBeUndefined();
      made?.dispose();
      return;
    }
    const backend = tf.backend() as unknown as WasmHeapBackend;
    chooseKernelPath(backend, 'js');
    try {
      const made = localOptimizerFor(adam);
      expect(made).toMatchObject({ path: 'tfjs', reason: 'the plain JavaScript kernel path is in use' });
      made?.dispose();
    } finally {
      chooseKernelPath(backend);
    }
  });

  it('learner - minibatches of feature bytes train and score as their float32 features do, to the bit', async () => {
    const spec: LearnerSpec = {
      ...MLP_SPEC,
      layout: { featureShape: [4, 3], featureDtype: 'uint8', scale: 1 / 255, labelDtype: 'int32', numClasses: 3 },
    };
    const size = 5;
    const featureBytes = Uint8Array.from({ length: size * 12 }, (_, i) => (i * 97 + 13) % 256);
    const labels = Int32Array.from({ length: size }, (_, i) => i % 3);
    const features = new Float32Array(featureBytes.length);
    plainByteConversion().convert(featureBytes, features, featureBytes.length, spec.layout.scale);
    const adam = { type: 'adam', learningRate: 0.01, beta1: 0.9, beta2: 0.999, epsilon: 1e-7, weightDecay: 0 } as const;
    const run = async (batch: Batch) => {
      const learner = new TfjsLearner({ mode: 'delta', localOptimizer: () => localOptimizerFor(adam) });
      await learner.initialize(spec);
      for (let i = 0; i < 3; i++) await learner.train(batch);
      const scored = await learner.evaluate(batch);
      const update = await learner.getUpdate();
      learner.shutdown();
      return { scored, update };
    };
    const backend = tf.backend() as unknown as WasmHeapBackend;
    // On wasm, converted on the heap by our kernel, and on the plain JavaScript kernel path.
    for (const path of backendName === 'wasm' ? (['wasm-simd', 'js'] as const) : [undefined]) {
      if (path !== undefined) expect(chooseKernelPath(backend, path).path).toBe(path);
      try {
        const fromFloats = await run({ features, labels, size });
        const fromBytes = await run({ features: new Float32Array(0), featureBytes, labels, size });
        expect(fromBytes.scored).toEqual(fromFloats.scored);
        expect(maxAbsDiff(fromBytes.update, fromFloats.update)).toBe(0);
        expect(
          maxAbsDiff(
            fromBytes.update,
            fromBytes.update.map((t) => ({ ...t, data: t.data.map(() => 0) })),
          ),
        ).toBeGreaterThan(0);
      } finally {
        if (path !== undefined) chooseKernelPath(backend);
      }
    }
  });

  it('learner - feature bytes are refused for a float32 layout and at the wrong length', async () => {
    const learner = new TfjsLearner();
    await learner.initialize(MLP_SPEC);
    const labels = Int32Array.from([0, 1]);
    await expect(
      learner.train({ features: new Float32Array(0), featureBytes: new Uint8Array(24), labels, size: 2 }),
    ).rejects.toThrow(/features as bytes, but the layout's are float32/);
    learner.shutdown();
    const bytesLearner = new TfjsLearner();
    await bytesLearner.initialize({ ...MLP_SPEC, layout: { ...MLP_SPEC.layout, featureDtype: 'uint8' } });
    await expect(
      bytesLearner.train({ features: new Float32Array(0), featureBytes: new Uint8Array(23), labels, size: 2 }),
    ).rejects.toThrow(/batch has 23 feature bytes, expected 2 x 12/);
    bytesLearner.shutdown();
  });

  it('learner - delta mode returns the change made by local SGD steps', async () => {
    const rate = 0.1;
    const learner = new TfjsLearner({ mode: 'delta', localLearningRate: rate });
    const { reference, start, batch, gradient, delta } = await firstDeltaAndGradient(learner, 9);
    const expected = gradient.map((g) => ({ ...g, data: g.data.map((v) => -rate * v) }));
    expect(maxAbsDiff(delta, expected)).toBeLessThanOrEqual(1e-6);

    const now = await learner.getParams();
    const moved = start.map((p, i) => ({ ...p, data: p.data.map((v, j) => v + delta[i]!.data[j]!) }));
    expect(maxAbsDiff(now, moved)).toBeLessThanOrEqual(1e-6);

    await learner.train(batch);
    await learner.train(batch);
    const second = await learner.getUpdate();
    const after = await learner.getParams();
    const twoSteps = now.map((p, i) => ({ ...p, data: p.data.map((v, j) => v + second[i]!.data[j]!) }));
    expect(maxAbsDiff(after, twoSteps)).toBeLessThanOrEqual(1e-6);
    learner.shutdown();
    reference.shutdown();
  });

  it('learner - getUpdate repeats the last update until the next train call', async () => {
    const learner = new TfjsLearner();
    await learner.initialize(MLP_SPEC);
    await expect(learner.getUpdate()).rejects.toThrow(LearnerStateError);
    await learner.train(makeBatch(MLP_SPEC, 4, 1));
    const first = await learner.getUpdate();
    expect(await learner.getUpdate()).toBe(first);
    await learner.train(makeBatch(MLP_SPEC, 4, 2));
    expect(maxAbsDiff(await learner.getUpdate(), first)).toBeGreaterThan(0);
    learner.setParams(await learner.getParams());
    await expect(learner.getUpdate()).rejects.toThrow(LearnerStateError);
    learner.shutdown();
  });

  it('learner - setParams refuses mismatched params and changes nothing', async () => {
    const learner = new TfjsLearner();
    await learner.initialize(MLP_SPEC);
    const params = await learner.getParams();
    const wrongShape = params.map((p, i) => (i === 2 ? { ...p, shape: [p.shape[1]!, p.shape[0]!] } : p));
    expect(() => learner.setParams(wrongShape)).toThrow(/layers\/2\/kernel.*shape \[8, 16\], expected \[16, 8\]/);
    expect(() => learner.setParams(params.slice(1))).toThrow(ParamMismatchError);
    expect(() => learner.setParams([...params, { ...params[0]!, name: 'extra' }])).toThrow(/unknown parameters: extra/);
    const zeros: PlainTensor[] = params.map((p) => ({ ...p, data: new Float32Array(p.data.length) }));
    zeros[0] = { ...zeros[0]!, dtype: 'int32', data: new Int32Array(zeros[0]!.data.length) };
    expect(() => learner.setParams(zeros)).toThrow(/dtype int32, expected float32/);
    expect(maxAbsDiff(await learner.getParams(), params)).toBe(0);
    learner.shutdown();
  });

  it('learner - malformed batches are refused', async () => {
    const learner = new TfjsLearner();
    await learner.initialize(MLP_SPEC);
    const batch = makeBatch(MLP_SPEC, 4, 1);
    await expect(learner.train({ ...batch, size: 5 })).rejects.toThrow(InvalidBatchError);
    await expect(learner.train({ ...batch, labels: Int32Array.of(0, 1, 3, 2) })).rejects.toThrow(
      /label 3 of example 2 is not a class index in \[0, 3\)/,
    );
    await expect(learner.evaluate({ ...batch, features: batch.features.subarray(1) })).rejects.toThrow(
      /47 feature values/,
    );
    learner.shutdown();
  });

  it('learner - evaluate sums per-example losses and counts correct predictions', async () => {
    const learner = new TfjsLearner();
    await learner.initialize(MLP_SPEC);
    const batch = makeBatch(MLP_SPEC, 10, 4);
    const { loss } = await learner.train(batch);
    const result = await learner.evaluate(batch);
    expect(result.samples).toBe(10);
    expect(result.lossSum).toBeCloseTo(loss * 10, 4);
    const predicted = tf.tidy(() =>
      (learner.model.predict(tf.tensor(batch.features, [10, 4, 3])) as tf.Tensor).argMax(1).dataSync(),
    );
    const correct = Array.from(predicted).filter((c, i) => c === batch.labels[i]).length;
    expect(result.correct).toBe(correct);
    learner.shutdown();
  });

  it('learner - cross-entropy stays finite for saturated logits', async () => {
    const learner = new TfjsLearner();
    await learner.initialize(MLP_SPEC);
    const params = await learner.getParams();
    learner.setParams(params.map((p) => ({ ...p, data: p.data.map((v) => v * 1e4) })));
    const { loss } = await learner.train(makeBatch(MLP_SPEC, 16, 2));
    expect(Number.isFinite(loss)).toBe(true);
    expect(loss).toBeGreaterThan(10);
    for (const t of await learner.getUpdate()) expect(t.data.every((v) => Number.isFinite(v))).toBe(true);
    learner.shutdown();
  });

  it('learner - regression uses the mean squared error', async () => {
    const learner = new TfjsLearner();
    await learner.initialize(REGRESSION_SPEC);
    const batch = makeBatch(REGRESSION_SPEC, 6, 3);
    const { loss } = await learner.train(batch);
    const predicted = tf.tidy(() => (learner.model.predict(tf.tensor(batch.features, [6, 5])) as tf.Tensor).dataSync());
    const mse = Array.from(predicted).reduce((s, p, i) => s + (p - batch.labels[i]!) ** 2, 0) / 6;
    expect(loss).toBeCloseTo(mse, 5);
    expect((await learner.evaluate(batch)).correct).toBe(0);
    learner.shutdown();
  });

  it('learner - a topology model trains and keeps canonical names', async () => {
    const source = tf.sequential({
      layers: [
        tf.layers.dense({ inputShape: [12], units: 6, activation: 'relu', name: 'first' }),
        tf.layers.dense({ units: 3, activation: 'softmax', name: 'second' }),
      ],
    });
    const topology = source.toJSON(null, false) as Record<string, unknown>;
    source.dispose();
    const spec: LearnerSpec = { ...MLP_SPEC, model: { topology } };
    const a = new TfjsLearner();
    const b = new TfjsLearner();
    await a.initialize(spec);
    await b.initialize({ ...spec, model: { topology: { modelTopology: topology } } });
    expect(a.paramNames).toEqual(['layers/0/kernel', 'layers/0/bias', 'layers/1/kernel', 'layers/1/bias']);
    expect(maxAbsDiff(await a.getParams(), await b.getParams())).toBe(0);
    const { loss } = await a.train(makeBatch(spec, 8, 1));
    expect(Number.isFinite(loss)).toBe(true);
    a.shutdown();
    b.shutdown();
  });

  it('learner - dropout draws a new mask at every step', async () => {
    const learner = new TfjsLearner();
    await learner.initialize({
      ...MLP_SPEC,
      model: { preset: 'mlp', hiddenUnits: [32], activation: 'relu', dropout: 0.5 },
    });
    const batch = makeBatch(MLP_SPEC, 8, 3);
    const first = (await learner.train(batch)).loss;
    const second = (await learner.train(batch)).loss;
    expect(second).not.toBe(first);
    const evaluation = await learner.evaluate(batch);
    expect((await learner.evaluate(batch)).lossSum).toBe(evaluation.lossSum);
    learner.shutdown();
  });

  it('learner - calls before initialize are refused', async () => {
    const learner = new TfjsLearner();
    await expect(learner.getParams()).rejects.toThrow(LearnerStateError);
    await expect(learner.getUpdate()).rejects.toThrow(/not initialised/);
    learner.shutdown();
  });
});

describe('learner across backends', () => {
  it('learner - wasm and cpu compute the same CNN gradient', async () => {
    await prepareWasmBackend();
    const batch = makeBatch(CNN_SPEC, 6, 21);
    const updates: PlainTensor[][] = [];
    for (const backendName of ['cpu', 'wasm']) {
      await tf.setBackend(backendName);
      const learner = new TfjsLearner();
      await learner.initialize(CNN_SPEC);
      await learner.train(batch);
      updates.push(await learner.getUpdate());
      learner.shutdown();
    }
    const [cpu, wasm] = updates as [PlainTensor[], PlainTensor[]];
    let scale = 0;
    for (const t of cpu) for (const v of t.data) scale = Math.max(scale, Math.abs(v));
    expect(scale).toBeGreaterThan(0);
    expect(maxAbsDiff(wasm, cpu)).toBeLessThanOrEqual(1e-4 * scale);
  });
});
