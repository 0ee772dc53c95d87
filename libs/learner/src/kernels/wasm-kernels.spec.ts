import * as tf from '@tensorflow/tfjs';
import fc from 'fast-check';
import { KERNELS_ENV_VAR } from '#libs/wasm-simd';
import { prepareWasmBackend } from '../backend.js';
import { chooseKernelPath, simdKernelsFor, type KernelPath } from './kernel-path.js';
import {
  backendKernelBehind,
  registerWasmKernels,
  WASM_FRONTED_KERNELS,
  WASM_FUSED_GRADIENTS,
  WASM_MISSING_KERNELS,
  WASM_REPLACED_KERNELS,
} from './register.js';
import type { WasmHeapBackend } from './wasm-heap.js';

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

/**
 * Expects `actual` to agree with `expected` within {@link RELATIVE_TOLERANCE} of each value (of
 * a hundredth of the largest, at least). `magnitude`: the size of the terms each value sums,
 * when they may cancel to far less than themselves; the rounding of a float32 sum grows with
 * its terms, not with its result, so the tolerance is taken of that at least.
 */
function expectClose(actual: Float32Array, expected: Float32Array, magnitude = 0): void {
  expect(actual.length).toBe(expected.length);
  let scale = 0;
  for (const v of expected) scale = Math.max(scale, Math.abs(v));
  for (let i = 0; i < expected.length; i++) {
    const diff = Math.abs(actual[i]! - expected[i]!);
    if (diff > RELATIVE_TOLERANCE * Math.max(Math.abs(expected[i]!), scale * 1e-2, 1e-6, magnitude)) {
      throw new Error(`element ${i}: ${actual[i]} vs ${expected[i]} (diff ${diff})`);
    }
  }
}

/**
 * A matrix product's sizes (A is m x k, B is k x n, before any transposition), which operands
 * are transposed, and the seed of their values.
 */
const PRODUCTS = {
  m: fc.integer({ min: 1, max: 37 }),
  k: fc.integer({ min: 1, max: 21 }),
  n: fc.integer({ min: 1, max: 37 }),
  transposeA: fc.boolean(),
  transposeB: fc.boolean(),
  seed: fc.integer(),
};

/**
 * `n` values as {@link randomValues} gives them, about `share` of them (0 to 1) zeros of either
 * sign (both are left out of our products' sums).
 */
function randomWithZeros(seed: number, n: number, share: number): Float32Array {
  const values = randomValues(seed, n);
  const draw = randomValues(seed ^ 0x2545f491, n);
  values.forEach((_, i) => {
    if ((draw[i]! + 1) / 2 < share) values[i] = i % 2 === 0 ? 0 : -0;
  });
  return values;
}

/** Runs `f` on a backend with fresh tensors and returns the result's values. */
async function onBackend(name: string, f: () => tf.Tensor): Promise<Float32Array> {
  await tf.setBackend(name);
  const result = tf.tidy(f);
  const values = (await result.data()) as Float32Array;
  result.dispose();
  return values;
}

/** Runs `f` on the wasm backend with our kernels on `path`. */
async function onWasm(path: KernelPath, f: () => tf.Tensor): Promise<Float32Array> {
  await tf.setBackend('wasm');
  const chosen = chooseKernelPath(wasmBackend(), path);
  // Names what failed, such as modules not yet assembled by `npm run build`.
  if (chosen.path !== path) throw new Error(`the ${path} kernels cannot run: ${chosen.reason}`);
  return onBackend('wasm', f);
}

function wasmBackend(): WasmHeapBackend {
  return tf.findBackend('wasm') as unknown as WasmHeapBackend;
}

/**
 * Runs `f` with our SIMD kernels, with the plain JavaScript ones (or, for a kernel we only stand
 * in front of, the backend's own) and on the cpu backend, and expects all three to agree.
 */
async function expectEveryPathAgrees(f: () => tf.Tensor): Promise<void> {
  const simd = await onWasm('wasm-simd', f);
  const js = await onWasm('js', f);
  const cpu = await onBackend('cpu', f);
  expectClose(simd, js);
  expectClose(simd, cpu);
  expectClose(js, cpu);
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

/**
 * Small images with channel counts that reach every block width of the SIMD kernels (16, 8, 4
 * and single channels) when the maxima allow.
 */
const convCase = (maxInChannels: number, maxOutChannels: number): fc.Arbitrary<ConvCase> =>
  fc
    .record({
      batch: fc.integer({ min: 1, max: 3 }),
      height: fc.integer({ min: 1, max: 8 }),
      width: fc.integer({ min: 1, max: 8 }),
      inChannels: fc.integer({ min: 1, max: maxInChannels }),
      outChannels: fc.integer({ min: 1, max: maxOutChannels }),
      filterHeight: fc.integer({ min: 1, max: 3 }),
      filterWidth: fc.integer({ min: 1, max: 3 }),
      strides: fc.tuple(fc.integer({ min: 1, max: 2 }), fc.integer({ min: 1, max: 2 })),
      pad: fc.constantFrom('same' as const, 'valid' as const),
      seed: fc.integer(),
    })
    .filter((c) => c.pad === 'same' || (c.filterHeight <= c.height && c.filterWidth <= c.width));

/**
 * The two depthwise conv2d gradient kernels on seeded random x, filter and dy, as functions to
 * run on each backend and kernel path.
 */
function depthwiseGradients(
  seed: number,
  xShape: Shape4,
  filterShape: Shape4,
  outShape: readonly number[],
  attrs: { strides: number | [number, number]; dilations: number | [number, number]; pad: 'same' | 'valid' },
): { filterGrad: () => tf.Tensor; inputGrad: () => tf.Tensor } {
  const dyShape = outShape as Shape4;
  const x = randomValues(seed, size(xShape));
  const w = randomValues(seed ^ 0x1234567, size(filterShape));
  const dy = randomValues(seed ^ 0x5bd1e995, size(dyShape));
  return {
    filterGrad: () =>
      tf
        .engine()
        .runKernel(
          'DepthwiseConv2dNativeBackpropFilter',
          { x: tf.tensor4d(x, xShape), dy: tf.tensor4d(dy, dyShape) },
          { ...attrs, filterShape },
        ) as tf.Tensor,
    inputGrad: () =>
      tf
        .engine()
        .runKernel(
          'DepthwiseConv2dNativeBackpropInput',
          { dy: tf.tensor4d(dy, dyShape), filter: tf.tensor4d(w, filterShape) },
          { ...attrs, inputShape: xShape },
        ) as tf.Tensor,
  };
}

describe('wasm kernels', () => {
  beforeAll(async () => {
    await prepareWasmBackend();
    await tf.setBackend('wasm');
  });

  afterAll(async () => {
    await tf.setBackend('wasm');
    chooseKernelPath(wasmBackend());
    await tf.setBackend('cpu');
  });

  it('wasm kernels - every extra kernel is registered for wasm, once', () => {
    for (const config of [...WASM_MISSING_KERNELS, ...WASM_REPLACED_KERNELS]) {
      expect(tf.getKernel(config.kernelName, 'wasm')).toBe(config);
    }
    for (const { kernelName } of WASM_FRONTED_KERNELS) expect(tf.getKernel(kernelName, 'wasm')).toBeDefined();
    for (const { kernel } of WASM_FUSED_GRADIENTS) expect(tf.getKernel(kernel.kernelName, 'wasm')).toBe(kernel);
    expect(registerWasmKernels()).toEqual([]);
  });

  it("wasm kernels - behind each front is the backend's own kernel, and nothing behind others", () => {
    for (const { kernelName } of WASM_FRONTED_KERNELS) {
      const own = backendKernelBehind(kernelName);
      expect(own).toBeDefined();
      expect(own).not.toBe(tf.getKernel(kernelName, 'wasm'));
      expect(own!.kernelName).toBe(kernelName);
    }
    for (const config of [...WASM_MISSING_KERNELS, ...WASM_REPLACED_KERNELS]) {
      expect(backendKernelBehind(config.kernelName)).toBeUndefined();
    }
    expect(backendKernelBehind('NoSuchKernel')).toBeUndefined();
  });

  it('wasm kernels - Conv2DBackpropFilter agrees on the SIMD, plain JS and cpu paths', async () => {
    await fc.assert(
      fc.asyncProperty(convCase(6, 37), fc.constantFrom('NHWC' as const, 'NCHW' as const), async (c, dataFormat) => {
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
        await expectEveryPathAgrees(run);
      }),
      { numRuns: 80 },
    );
  });

  it('wasm kernels - Conv2DBackpropInput agrees on the SIMD, backend and cpu paths', async () => {
    await fc.assert(
      fc.asyncProperty(convCase(37, 11), async (c) => {
        const xShape: Shape4 = [c.batch, c.height, c.width, c.inChannels];
        const filterShape: Shape4 = [c.filterHeight, c.filterWidth, c.inChannels, c.outChannels];
        const info = tf.backend_util.computeConv2DInfo(xShape, filterShape, c.strides, 1, c.pad);
        const w = randomValues(c.seed ^ 0x1234567, size(filterShape));
        const dy = randomValues(c.seed ^ 0x5bd1e995, size(info.outShape));
        const run = (): tf.Tensor =>
          tf
            .engine()
            .runKernel(
              'Conv2DBackpropInput',
              { dy: tf.tensor4d(dy, info.outShape), filter: tf.tensor4d(w, filterShape) },
              { strides: c.strides, pad: c.pad, dataFormat: 'NHWC', inputShape: xShape },
            ) as tf.Tensor;
        await expectEveryPathAgrees(run);
      }),
      { numRuns: 80 },
    );
  });

  it('wasm kernels - depthwise conv2d gradients agree on the SIMD, plain JS and cpu paths', async () => {
    await fc.assert(
      // Up to 37 input channels with multiplier 1 reach every block width; larger multipliers
      // take the broadcast path.
      fc.asyncProperty(fc.oneof(convCase(37, 1), convCase(5, 6)), async (c) => {
        const xShape: Shape4 = [c.batch, c.height, c.width, c.inChannels];
        const filterShape: Shape4 = [c.filterHeight, c.filterWidth, c.inChannels, c.outChannels];
        const info = tf.backend_util.computeConv2DInfo(xShape, filterShape, c.strides, 1, c.pad, undefined, true);
        const { filterGrad, inputGrad } = depthwiseGradients(c.seed, xShape, filterShape, info.outShape, {
          strides: c.strides,
          dilations: 1,
          pad: c.pad,
        });
        await expectEveryPathAgrees(filterGrad);
        await expectEveryPathAgrees(inputGrad);
      }),
      { numRuns: 60 },
    );
  });

  it('wasm kernels - dilated depthwise conv2d gradients agree on the SIMD and plain JS paths', async () => {
    // The cpu backend's depthwise gradients ignore dilations, so the plain JS kernels are the
    // reference here.
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(convCase(20, 1), convCase(4, 5)),
        fc.tuple(fc.integer({ min: 1, max: 3 }), fc.integer({ min: 1, max: 3 })),
        async (c, dilations) => {
          const xShape: Shape4 = [c.batch, c.height, c.width, c.inChannels];
          const filterShape: Shape4 = [c.filterHeight, c.filterWidth, c.inChannels, c.outChannels];
          const info = tf.backend_util.computeConv2DInfo(xShape, filterShape, 1, dilations, 'same', undefined, true);
          const { filterGrad, inputGrad } = depthwiseGradients(c.seed, xShape, filterShape, info.outShape, {
            strides: 1,
            dilations,
            pad: 'same',
          });
          expectClose(await onWasm('wasm-simd', filterGrad), await onWasm('js', filterGrad));
          expectClose(await onWasm('wasm-simd', inputGrad), await onWasm('js', inputGrad));
        },
      ),
      { numRuns: 40 },
    );
  });

  it('wasm kernels - MaxPoolGrad agrees on the SIMD, plain JS and cpu paths, negative maxima and ties included', async () => {
    await fc.assert(
      fc.asyncProperty(convCase(11, 1), fc.boolean(), async (c, coarse) => {
        const xShape: Shape4 = [c.batch, c.height, c.width, c.inChannels];
        const filterSize: [number, number] = [c.filterHeight, c.filterWidth];
        const info = tf.backend_util.computePool2DInfo(xShape, filterSize, c.strides, 1, c.pad);
        const x = randomValues(c.seed, size(xShape)).map((v) => (coarse ? Math.round(v * 2) / 2 : v) - 0.5);
        const dy = randomValues(c.seed ^ 0x5bd1e995, size(info.outShape));
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
        await expectEveryPathAgrees(grad);
      }),
      { numRuns: 60 },
    );
  });

  it('wasm kernels - BatchMatMul agrees on the SIMD, backend and cpu paths, transposed, broadcast and with A mostly zeros', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          ...PRODUCTS,
          // The share of A that is zero: dense, an image's background, a relu's, all of it.
          zeros: fc.constantFrom(0, 0.5, 0.9, 1),
          // Outer (batch) shapes: none, one matrix, or three, on either side.
          outerA: fc.constantFrom([], [1], [3]),
          outerB: fc.constantFrom([], [1], [3]),
        }),
        async (c) => {
          const aShape = [...c.outerA, ...(c.transposeA ? [c.k, c.m] : [c.m, c.k])];
          const bShape = [...c.outerB, ...(c.transposeB ? [c.n, c.k] : [c.k, c.n])];
          const a = randomWithZeros(c.seed, size(aShape), c.zeros);
          const b = randomValues(c.seed ^ 0x5bd1e995, size(bShape));
          const run = (): tf.Tensor =>
            tf
              .engine()
              .runKernel(
                'BatchMatMul',
                { a: tf.tensor(a, aShape), b: tf.tensor(b, bShape) },
                { transposeA: c.transposeA, transposeB: c.transposeB },
              ) as tf.Tensor;
          await expectEveryPathAgrees(run);
        },
      ),
      { numRuns: 120 },
    );
  });

  it('wasm kernels - a fused dense product (bias, relu) agrees on the SIMD, backend and cpu paths', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          ...PRODUCTS,
          zeros: fc.constantFrom(0, 0.5, 1),
          // A bias per column or none (the backend takes no other); elu is the backend's alone.
          bias: fc.constantFrom('column', 'none'),
          activation: fc.constantFrom('linear', 'relu', 'elu'),
        }),
        async (c) => {
          const aShape = c.transposeA ? [c.k, c.m] : [c.m, c.k];
          const bShape = c.transposeB ? [c.n, c.k] : [c.k, c.n];
          const a = randomWithZeros(c.seed, c.m * c.k, c.zeros);
          const b = randomValues(c.seed ^ 0x5bd1e995, c.k * c.n);
          const bias = randomValues(c.seed ^ 0x68e31da4, c.n);
          const run = (): tf.Tensor =>
            tf.fused.matMul({
              a: tf.tensor(a, aShape),
              b: tf.tensor(b, bShape),
              transposeA: c.transposeA,
              transposeB: c.transposeB,
              bias: c.bias === 'none' ? undefined : tf.tensor(bias, [c.n]),
              activation: c.activation as 'linear' | 'relu' | 'elu',
            });
          const simd = await onWasm('wasm-simd', run);
          const cpu = await onBackend('cpu', run);
          // The backend's own kernel adds the bias wrongly when an operand is transposed (A =
          // [0.3, -0.7] transposed times B = [0.9, -0.4] plus [0.05, -0.08] gave -0.71 where
          // -0.58 is right): it is held to the cpu backend only elsewhere, ours everywhere.
          const backendRight = c.bias === 'none' || (!c.transposeA && !c.transposeB);
          if (c.activation !== 'elu' || backendRight) expectClose(simd, cpu);
          if (backendRight) expectClose(await onWasm('js', run), cpu);
        },
      ),
      { numRuns: 80 },
    );
  });

  it("wasm kernels - a fused dense product's bias and relu are ours, value for value a plain loop over the product", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          m: fc.integer({ min: 1, max: 9 }),
          k: fc.integer({ min: 1, max: 7 }),
          n: fc.integer({ min: 1, max: 23 }),
          bias: fc.constantFrom('column', 'none'),
          // Bias values that make NaN, -0 and exact zeros of the sum, where relu must leave
          // NaN and -0 as they are and make nothing else of a zero.
          specials: fc.array(fc.constantFrom(Number.NaN, -0, 0, Infinity, -Infinity), { maxLength: 4 }),
          seed: fc.integer(),
        }),
        async (c) => {
          const a = randomWithZeros(c.seed, c.m * c.k, 0.5);
          const b = randomValues(c.seed ^ 0x5bd1e995, c.k * c.n);
          const bias = randomValues(c.seed ^ 0x68e31da4, c.n);
          c.specials.forEach((v, i) => (bias[i % c.n] = v));
          const biasTensor = (): tf.Tensor | undefined => (c.bias === 'none' ? undefined : tf.tensor(bias, [c.n]));
          await tf.setBackend('wasm');
          chooseKernelPath(wasmBackend(), 'wasm-simd');
          const kernels = simdKernelsFor(wasmBackend())!;
          const ours = kernels.biasRelu;
          let calls = 0;
          kernels.biasRelu = (...args: number[]) => {
            calls += 1;
            ours(...args);
          };
          try {
            const fused = await onWasm('wasm-simd', () =>
              tf.fused.matMul({
                a: tf.tensor(a, [c.m, c.k]),
                b: tf.tensor(b, [c.k, c.n]),
                bias: biasTensor(),
                activation: 'relu',
              }),
            );
            const product = await onWasm('wasm-simd', () =>
              tf.matMul(tf.tensor(a, [c.m, c.k]), tf.tensor(b, [c.k, c.n])),
            );
            const expected = product.map((p, i) => {
              const v = Math.fround(p + (c.bias === 'none' ? 0 : bias[i % c.n]!));
              return v < 0 ? 0 : v;
            });
            // toEqual holds NaN equal to NaN and -0 apart from 0.
            expect(Array.from(fused)).toEqual(Array.from(expected));
            expect(calls).toBe(1);
          } finally {
            kernels.biasRelu = ours;
          }
        },
      ),
      { numRuns: 60 },
    );
  });

  /**
   * Runs `run` on the SIMD path (counting the calls of our kernel `kernel`), on the plain path
   * (the backend's own kernel) and on the cpu backend; expects the three results to have one
   * shape and to agree (the SIMD and backend ones value for value when `exact`; `magnitude` as for
   * `expectClose`), and returns how often our kernel ran.
   */
  async function simdCallsAgreeing(
    kernel: 'biasAdd' | 'sumRows' | 'reluGrad',
    run: () => tf.Tensor,
    exact: boolean,
    magnitude = 0,
  ): Promise<number> {
    await tf.setBackend('wasm');
    chooseKernelPath(wasmBackend(), 'wasm-simd');
    const kernels = simdKernelsFor(wasmBackend())!;
    const ours = kernels[kernel];
    let calls = 0;
    kernels[kernel] = (...args: number[]) => {
      calls += 1;
      ours(...args);
    };
    const shapeOf = async (path: KernelPath) => {
      await onWasm(path, () => tf.zeros([1]));
      return tf.tidy(() => run().shape);
    };
    try {
      const simd = await onWasm('wasm-simd', run);
      const simdShape = await shapeOf('wasm-simd');
      const backend = await onWasm('js', run);
      expect(await shapeOf('js')).toEqual(simdShape);
      if (exact) expect(Array.from(simd)).toEqual(Array.from(backend));
      else expectClose(simd, backend, magnitude);
      expectClose(simd, await onBackend('cpu', run), magnitude);
    } finally {
      kernels[kernel] = ours;
    }
    return calls;
  }

  it("wasm kernels - Add of a channel bias is ours, either way round, and equals the backend's; other adds are not", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          lead: fc.array(fc.integer({ min: 1, max: 5 }), { maxLength: 3 }),
          channels: fc.integer({ min: 1, max: 19 }),
          // The bias as [C], or with leading ones up to the rank of x; or a shape that is no bias.
          biasOnes: fc.integer({ min: 0, max: 3 }),
          notBias: fc.boolean(),
          biasFirst: fc.boolean(),
          seed: fc.integer(),
        }),
        async (c) => {
          const xShape = [...c.lead, c.channels];
          const biasShape = c.notBias
            ? xShape.slice(-2)
            : [...Array<number>(Math.min(c.biasOnes, c.lead.length)).fill(1), c.channels];
          const isBias = biasShape.slice(0, -1).every((d) => d === 1);
          const x = randomValues(c.seed, size(xShape));
          const bias = randomValues(c.seed ^ 0x5bd1e995, size(biasShape));
          const run = (): tf.Tensor => {
            const [a, b] = [tf.tensor(x, xShape), tf.tensor(bias, biasShape)];
            return tf.engine().runKernel('Add', c.biasFirst ? { a: b, b: a } : { a, b }) as tf.Tensor;
          };
          const calls = await simdCallsAgreeing('biasAdd', run, true);
          // Three runs on the SIMD path: the values, and the shape twice (after a first op).
          expect(calls).toBe(isBias ? 2 : 0);
        },
      ),
      { numRuns: 60 },
    );
  });

  it('wasm kernels - Sum over every axis but the last is ours, and agrees with the backend; other sums are not', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          shape: fc.array(fc.integer({ min: 1, max: 7 }), { minLength: 1, maxLength: 4 }),
          channels: fc.integer({ min: 1, max: 19 }),
          // Every axis but the last, spelled in a random order and with negative indices; or some other set.
          axes: fc.constantFrom('leading', 'leadingNegative', 'last', 'all', 'first'),
          keepDims: fc.boolean(),
          seed: fc.integer(),
        }),
        async (c) => {
          const shape = [...c.shape.slice(0, -1), c.channels];
          const rank = shape.length;
          const leading = Array.from({ length: rank - 1 }, (_, i) => i);
          const axis = {
            leading: [...leading].reverse(),
            leadingNegative: leading.map((i) => i - rank),
            last: [rank - 1],
            all: [...leading, rank - 1],
            first: [0],
          }[c.axes];
          const ours =
            rank >= 2 && (c.axes === 'leading' || c.axes === 'leadingNegative' || (c.axes === 'first' && rank === 2));
          const x = randomValues(c.seed, size(shape));
          const run = (): tf.Tensor =>
            tf.engine().runKernel('Sum', { x: tf.tensor(x, shape) }, { axis, keepDims: c.keepDims }) as tf.Tensor;
          // Each sum has this many terms, each below 1 in size: 18 of them summed to -0.00088.
          const terms = axis.reduce((n, a) => n * shape[(a + rank) % rank]!, 1);
          expect(await simdCallsAgreeing('sumRows', run, false, terms)).toBe(ours ? 2 : 0);
        },
      ),
      { numRuns: 60 },
    );
  });

  it("wasm kernels - relu's gradient is our kernel on the SIMD path and TF.js's expression elsewhere, value for value", async () => {
    const special = [Number.NaN, 0, -0, Infinity, -Infinity, 1e-30, -1e-30];
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          shape: fc.array(fc.integer({ min: 1, max: 6 }), { minLength: 1, maxLength: 4 }),
          // Where x and dy take a special value (NaN, signed zeros, infinities, tiny values).
          xSpecial: fc.array(fc.tuple(fc.nat(), fc.constantFrom(...special)), { maxLength: 6 }),
          dySpecial: fc.array(fc.tuple(fc.nat(), fc.constantFrom(...special)), { maxLength: 6 }),
          seed: fc.integer(),
        }),
        async (c) => {
          const n = size(c.shape);
          const x = randomValues(c.seed, n);
          const dy = randomValues(c.seed ^ 0x5bd1e995, n);
          for (const [at, v] of c.xSpecial) x[at % n] = v;
          for (const [at, v] of c.dySpecial) dy[at % n] = v;
          const run = (): tf.Tensor =>
            tf.grad((t: tf.Tensor) => tf.relu(t))(tf.tensor(x, c.shape), tf.tensor(dy, c.shape));
          const expression = (): tf.Tensor => {
            const t = tf.tensor(x, c.shape);
            return tf.mul(tf.tensor(dy, c.shape), tf.cast(tf.step(t), 'float32'));
          };
          expect(await simdCallsAgreeing('reluGrad', run, true)).toBe(2);
          // Signed zeros and NaNs as the expression gives them on the backend.
          const spelled = (values: Float32Array) => Array.from(values, (v) => (Object.is(v, -0) ? '-0' : String(v)));
          expect(spelled(await onWasm('wasm-simd', run))).toEqual(spelled(await onWasm('js', expression)));
        },
      ),
      { numRuns: 60 },
    );
  });

  it("wasm kernels - a second derivative through relu is the same on the SIMD path as TF.js's", async () => {
    const shape = [3, 5, 7];
    const x = randomValues(11, size(shape));
    x[0] = 0;
    x[1] = -0;
    // d/dx of sum(d/dy sum(relu(y) * relu(y) * y)): through relu's gradient, and through its gradient's.
    const run = (): tf.Tensor =>
      tf.grad((v: tf.Tensor) =>
        tf
          .grad((y: tf.Tensor) => tf.sum(tf.mul(tf.square(tf.relu(y)), y)))(v)
          .sum(),
      )(tf.tensor(x, shape));
    expect(await simdCallsAgreeing('reluGrad', run, true)).toBeGreaterThan(2);
  });

  it('wasm kernels - SIMD kernels give the same gradients after the wasm heap grows', async () => {
    const xShape: Shape4 = [2, 9, 7, 6];
    const filterShape: Shape4 = [3, 3, 6, 10];
    const info = tf.backend_util.computeConv2DInfo(xShape, filterShape, 1, 1, 'same');
    const x = randomValues(11, size(xShape));
    const dy = randomValues(12, size(info.outShape));
    const run = (): tf.Tensor =>
      tf
        .engine()
        .runKernel(
          'Conv2DBackpropFilter',
          { x: tf.tensor4d(x, xShape), dy: tf.tensor4d(dy, info.outShape) },
          { strides: 1, pad: 'same', dataFormat: 'NHWC', filterShape },
        ) as tf.Tensor;
    const before = await onWasm('wasm-simd', run);
    const heap = wasmBackend().wasm;
    const bytesBefore = heap.HEAPU8.buffer.byteLength;
    // A tensor larger than the whole heap makes the backend grow its memory.
    const large = tf.zeros([bytesBefore / 2]);
    expect(heap.HEAPU8.buffer.byteLength).toBeGreaterThan(bytesBefore);
    const after = await onWasm('wasm-simd', run);
    large.dispose();
    expect(Array.from(after)).toEqual(Array.from(before));
  });

  it('wasm kernels - a clone shares its memory, which lives until the last tensor on it is disposed', async () => {
    await tf.setBackend('wasm');
    // The engine counts bytes per tensor, shared or not; buffers it counts once, as the backend
    // counts the memory it holds.
    const buffers = (): number => {
      expect(tf.backend().numDataIds()).toBe(tf.memory().numDataBuffers);
      return tf.memory().numDataBuffers;
    };
    const before = buffers();
    const values = randomValues(21, 1000);
    const x = tf.tensor1d(values);
    const copy = tf.clone(x);
    expect(wasmBackend().getMemoryOffset(copy.dataId)).toBe(wasmBackend().getMemoryOffset(x.dataId));
    expect(buffers()).toBe(before + 1);
    x.dispose();
    expect(Array.from(await copy.data())).toEqual(Array.from(values));
    const again = tf.clone(copy);
    copy.dispose();
    expect(Array.from(await again.data())).toEqual(Array.from(values));
    again.dispose();
    expect(buffers()).toBe(before);
    // Strings share as numbers do.
    const words = tf.tensor1d(['a', 'bc']);
    const wordsCopy = tf.clone(words);
    words.dispose();
    expect(await wordsCopy.data()).toEqual(['a', 'bc']);
    wordsCopy.dispose();
    expect(buffers()).toBe(before);
  });

  it('wasm kernels - gradients through saved tensors (clones) free all their memory', () => {
    tf.engine().startScope();
    const w = tf.tidy(() => tf.variable(tf.tensor2d(randomValues(22, 12), [3, 4])));
    const x = tf.tensor2d(randomValues(23, 6), [2, 3]);
    const tensorsBefore = tf.memory().numTensors;
    const buffersBefore = tf.memory().numDataBuffers;
    for (let i = 0; i < 3; i++) {
      tf.tidy(() => {
        const { grads } = tf.variableGrads(() => tf.relu(tf.matMul(x, w)).square().sum() as tf.Scalar);
        w.assign(tf.sub(w, tf.mul(grads[w.name]!, 0.01)));
      });
    }
    expect(tf.memory().numTensors).toBe(tensorsBefore);
    expect(tf.memory().numDataBuffers).toBe(buffersBefore);
    tf.engine().endScope();
  });

  it('wasm kernels - TRIBUTARY_KERNELS=js forces the plain JS path, and says so', async () => {
    await tf.setBackend('wasm');
    const saved = process.env[KERNELS_ENV_VAR];
    try {
      process.env[KERNELS_ENV_VAR] = 'js';
      expect(chooseKernelPath(wasmBackend())).toEqual({ path: 'js', reason: 'TRIBUTARY_KERNELS=js' });
      expect(simdKernelsFor(wasmBackend())).toBeUndefined();
      process.env[KERNELS_ENV_VAR] = 'auto';
      expect(chooseKernelPath(wasmBackend())).toEqual({ path: 'wasm-simd' });
      expect(simdKernelsFor(wasmBackend())).toBeDefined();
    } finally {
      if (saved === undefined) delete process.env[KERNELS_ENV_VAR];
      else process.env[KERNELS_ENV_VAR] = saved;
    }
  });

  it('wasm kernels - a backend whose memory cannot be reached falls back to plain JS with the reason', () => {
    const unreachable = { ...wasmBackend(), wasm: { ...wasmBackend().wasm, asm: {}, wasmMemory: undefined } };
    const chosen = chooseKernelPath(unreachable as WasmHeapBackend, 'wasm-simd');
    expect(chosen.path).toBe('js');
    expect(chosen.reason).toMatch(/asm\.memory/);
    expect(chooseKernelPath(wasmBackend(), 'wasm-simd').path).toBe('wasm-simd');
  });

  it('wasm kernels - conv2d filter gradient through tf.grads matches the cpu backend', async () => {
    const xShape: Shape4 = [2, 7, 6, 3];
    const filterShape: Shape4 = [3, 3, 3, 5];
    const x = randomValues(1, size(xShape));
    const w = randomValues(2, size(filterShape));
    for (const pad of ['same', 'valid'] as const) {
      const filterGrad = (): tf.Tensor =>
        tf.grad((f: tf.Tensor) => tf.sum(tf.square(tf.conv2d(tf.tensor4d(x, xShape), f as tf.Tensor4D, 2, pad))))(
          tf.tensor4d(w, filterShape),
        );
      await expectEveryPathAgrees(filterGrad);
    }
  });

  it.each(['wasm-simd', 'js'] as const)(
    'wasm kernels - a small CNN trains on wasm with falling loss (%s kernels)',
    async (path) => {
      await tf.setBackend('wasm');
      chooseKernelPath(wasmBackend(), path);
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
    },
  );
});
