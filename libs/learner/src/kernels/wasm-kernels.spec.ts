import * as tf from '@tensorflow/tfjs';
import fc from 'fast-check';
import { prepareWasmBackend } from '../backend.js';
import { registerWasmKernels, WASM_MISSING_KERNELS, WASM_REPLACED_KERNELS } from './register.js';

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

const RELATIVE_TOLERANCE = 1e-4;

type Shape4 = [number, number, number, number];

const size = (shape: readonly number[]): number => shape.reduce((a, b) => a * b, 1);

function expectClose(actual: Float32Array, expected: Float32Array): void {
  expect(actual.length).toBe(expected.length);
  let scale = 0;
  for (const v of expected) scale = Math.max(scale, Math.abs(v));
  for (let i = 0; i < expected.length; i++) {
    const diff = Math.abs(actual[i]! - expected[i]!);
    if (diff > RELATIVE_TOLERANCE * Math.max(Math.abs(expected[i]!), scale * 1e-2, 1e-6)) {
      throw new Error(`element ${i}: ${actual[i]} vs ${expected[i]} (diff ${diff})`);
    }
  }
}

/** Runs `f` on a backend with fresh tensors and returns the result's values. */
async function onBackend(name: string, f: () => tf.Tensor): Promise<Float32Array> {
  await tf.setBackend(name);
  const result = tf.tidy(f);
  const values = (await result.data()) as Float32Array;
  result.dispose();
  return values;
}

interface ConvCase {
  batch: number;
  height: number;
  width: number;
  inChannels: number;
  outChannels: number;
  filterHeight: number;
  filterWidth: number;
  strides: [number, number];
  pad: 'same' | 'valid';
  seed: number;
}

const convCase = (maxMultiplier = 4): fc.Arbitrary<ConvCase> =>
  fc
    .record({
      batch: fc.integer({ min: 1, max: 3 }),
      height: fc.integer({ min: 1, max: 8 }),
      width: fc.integer({ min: 1, max: 8 }),
      inChannels: fc.integer({ min: 1, max: 4 }),
      outChannels: fc.integer({ min: 1, max: maxMultiplier }),
      filterHeight: fc.integer({ min: 1, max: 3 }),
      filterWidth: fc.integer({ min: 1, max: 3 }),
      strides: fc.tuple(fc.integer({ min: 1, max: 2 }), fc.integer({ min: 1, max: 2 })),
      pad: fc.constantFrom('same' as const, 'valid' as const),
      seed: fc.integer(),
    })
    .filter((c) => c.pad === 'same' || (c.filterHeight <= c.height && c.filterWidth <= c.width));

describe('wasm kernels', () => {
  beforeAll(async () => {
    await prepareWasmBackend();
    await tf.setBackend('wasm');
  });

  afterAll(async () => {
    await tf.setBackend('cpu');
  });

  it('wasm kernels - every extra kernel is registered for wasm, once', () => {
    for (const config of [...WASM_MISSING_KERNELS, ...WASM_REPLACED_KERNELS]) {
      expect(tf.getKernel(config.kernelName, 'wasm')).toBe(config);
    }
    expect(registerWasmKernels()).toEqual([]);
  });

  it('wasm kernels - Conv2DBackpropFilter matches the cpu backend', async () => {
    await fc.assert(
      fc.asyncProperty(convCase(), fc.constantFrom('NHWC' as const, 'NCHW' as const), async (c, dataFormat) => {
        const channelsLast = dataFormat === 'NHWC';
        const xShape: Shape4 = channelsLast
          ? [c.batch, c.height, c.width, c.inChannels]
          : [c.batch, c.inChannels, c.height, c.width];
        const filterShape: Shape4 = [c.filterHeight, c.filterWidth, c.inChannels, c.outChannels];
        const info = tf.backend_util.computeConv2DInfo(
          xShape,
          filterShape,
          c.strides,
          1,
          c.pad,
          undefined,
          false,
          channelsLast ? 'channelsLast' : 'channelsFirst',
        );
        const x = randomValues(c.seed, size(xShape));
        const dy = randomValues(c.seed ^ 0x5bd1e995, size(info.outShape));
        const run = (): tf.Tensor =>
          tf
            .engine()
            .runKernel(
              'Conv2DBackpropFilter',
              { x: tf.tensor4d(x, xShape), dy: tf.tensor4d(dy, info.outShape) },
              { strides: c.strides, pad: c.pad, dataFormat, filterShape },
            ) as tf.Tensor;
        expectClose(await onBackend('wasm', run), await onBackend('cpu', run));
      }),
      { numRuns: 80 },
    );
  });

  it('wasm kernels - depthwise conv2d gradients match the cpu backend', async () => {
    await fc.assert(
      fc.asyncProperty(convCase(3), async (c) => {
        const xShape = [c.batch, c.height, c.width, c.inChannels] as [number, number, number, number];
        const filterShape = [c.filterHeight, c.filterWidth, c.inChannels, c.outChannels] as [
          number,
          number,
          number,
          number,
        ];
        const info = tf.backend_util.computeConv2DInfo(xShape, filterShape, c.strides, 1, c.pad, undefined, true);
        const x = randomValues(
          c.seed,
          xShape.reduce((a, b) => a * b),
        );
        const w = randomValues(
          c.seed ^ 0x1234567,
          filterShape.reduce((a, b) => a * b),
        );
        const dy = randomValues(
          c.seed ^ 0x5bd1e995,
          info.outShape.reduce((a, b) => a * b),
        );
        const attrs = { strides: c.strides, dilations: 1, pad: c.pad };
        const filterGrad = (): tf.Tensor =>
          tf
            .engine()
            .runKernel(
              'DepthwiseConv2dNativeBackpropFilter',
              { x: tf.tensor4d(x, xShape), dy: tf.tensor4d(dy, info.outShape) },
              { ...attrs, filterShape },
            ) as tf.Tensor;
        const inputGrad = (): tf.Tensor =>
          tf
            .engine()
            .runKernel(
              'DepthwiseConv2dNativeBackpropInput',
              { dy: tf.tensor4d(dy, info.outShape), filter: tf.tensor4d(w, filterShape) },
              { ...attrs, inputShape: xShape },
            ) as tf.Tensor;
        expectClose(await onBackend('wasm', filterGrad), await onBackend('cpu', filterGrad));
        expectClose(await onBackend('wasm', inputGrad), await onBackend('cpu', inputGrad));
      }),
      { numRuns: 40 },
    );
  });

  it('wasm kernels - MaxPoolGrad matches the cpu backend, negative maxima and ties included', async () => {
    await fc.assert(
      fc.asyncProperty(convCase(1), fc.boolean(), async (c, coarse) => {
        const xShape = [c.batch, c.height, c.width, c.inChannels] as [number, number, number, number];
        const filterSize: [number, number] = [c.filterHeight, c.filterWidth];
        const info = tf.backend_util.computePool2DInfo(xShape, filterSize, c.strides, 1, c.pad);
        const x = randomValues(
          c.seed,
          xShape.reduce((a, b) => a * b),
        ).map((v) => (coarse ? Math.round(v * 2) / 2 : v) - 0.5);
        const dy = randomValues(
          c.seed ^ 0x5bd1e995,
          info.outShape.reduce((a, b) => a * b),
        );
        const grad = (): tf.Tensor => {
          const input = tf.tensor4d(x, xShape);
          return tf
            .engine()
            .runKernel(
              'MaxPoolGrad',
              { dy: tf.tensor4d(dy, info.outShape), input, output: tf.maxPool(input, filterSize, c.strides, c.pad) },
              { filterSize, strides: c.strides, pad: c.pad },
            ) as tf.Tensor;
        };
        expectClose(await onBackend('wasm', grad), await onBackend('cpu', grad));
      }),
      { numRuns: 60 },
    );
  });

  it('wasm kernels - conv2d filter gradient through tf.grads matches the cpu backend', async () => {
    const xShape: [number, number, number, number] = [2, 7, 6, 3];
    const filterShape: [number, number, number, number] = [3, 3, 3, 5];
    const x = randomValues(
      1,
      xShape.reduce((a, b) => a * b),
    );
    const w = randomValues(
      2,
      filterShape.reduce((a, b) => a * b),
    );
    for (const pad of ['same', 'valid'] as const) {
      const filterGrad = (): tf.Tensor =>
        tf.grad((f: tf.Tensor) => tf.sum(tf.square(tf.conv2d(tf.tensor4d(x, xShape), f as tf.Tensor4D, 2, pad))))(
          tf.tensor4d(w, filterShape),
        );
      expectClose(await onBackend('wasm', filterGrad), await onBackend('cpu', filterGrad));
    }
  });

  it('wasm kernels - a small CNN trains on wasm with falling loss', async () => {
    await tf.setBackend('wasm');
    const model = tf.sequential({
      layers: [
        tf.layers.conv2d({
          inputShape: [8, 8, 1],
          filters: 4,
          kernelSize: 3,
          padding: 'same',
          activation: 'relu',
          kernelInitializer: tf.initializers.glorotUniform({ seed: 1 }),
        }),
        tf.layers.maxPooling2d({ poolSize: 2 }),
        tf.layers.conv2d({
          filters: 4,
          kernelSize: 3,
          strides: 2,
          padding: 'valid',
          activation: 'relu',
          kernelInitializer: tf.initializers.glorotUniform({ seed: 2 }),
        }),
        tf.layers.flatten(),
        tf.layers.dense({ units: 2, kernelInitializer: tf.initializers.glorotUniform({ seed: 3 }) }),
      ],
    });
    // Two classes: bright top half versus bright bottom half.
    const n = 16;
    const images = new Float32Array(n * 64);
    const labels = new Int32Array(n);
    const noise = randomValues(7, n * 64);
    for (let i = 0; i < n; i++) {
      labels[i] = i % 2;
      for (let p = 0; p < 64; p++) {
        const top = p < 32;
        images[i * 64 + p] = (top === (labels[i] === 0) ? 1 : 0) + 0.1 * noise[i * 64 + p]!;
      }
    }
    const xs = tf.tensor4d(images, [n, 8, 8, 1]);
    const ys = tf.oneHot(tf.tensor1d(labels, 'int32'), 2);
    const optimizer = tf.train.sgd(0.1);
    const losses: number[] = [];
    for (let step = 0; step < 15; step++) {
      const loss = optimizer.minimize(
        () => tf.losses.softmaxCrossEntropy(ys, model.apply(xs) as tf.Tensor) as tf.Scalar,
        true,
      )!;
      losses.push((await loss.data())[0]!);
      loss.dispose();
    }
    tf.dispose([xs, ys]);
    optimizer.dispose();
    model.dispose();
    expect(losses[losses.length - 1]!).toBeLessThan(losses[0]! * 0.8);
  });
});
