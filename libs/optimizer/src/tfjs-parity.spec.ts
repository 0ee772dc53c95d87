import fc from 'fast-check';
import * as tf from '@tensorflow/tfjs';
import {
  adamKernel,
  jsKernelBackend,
  momentumKernel,
  resolveHyperparams,
  selectKernelBackend,
  sgdKernel,
  type KernelBackend,
  type OptimizerHyperparams,
  type OptimizerKernel,
} from './index.js';

/** Both ways the kernels run: the plain loops, and SIMD128 over arrays in the kernel heap. */
const BACKENDS: [string, KernelBackend][] = [
  ['js', jsKernelBackend],
  ['wasm-simd', selectKernelBackend('wasm-simd').backend],
];

const value = fc.float({ min: -10, max: 10, noNaN: true, noDefaultInfinity: true }).map(Math.fround);

const trajectory = fc.integer({ min: 1, max: 12 }).chain((n) =>
  fc.record({
    param: fc.array(value, { minLength: n, maxLength: n }),
    grads: fc.array(fc.array(value, { minLength: n, maxLength: n }), { minLength: 1, maxLength: 4 }),
  }),
);

const learningRate = fc.double({ min: 1e-3, max: 0.2, noNaN: true });

function tfOptimizer(kernel: OptimizerKernel, h: OptimizerHyperparams): tf.Optimizer {
  switch (kernel.name) {
    case 'sgd':
      return tf.train.sgd(h.learningRate);
    case 'momentum':
      return tf.train.momentum(h.learningRate, h.momentum, h.useNesterov);
    case 'adam':
      return tf.train.adam(h.learningRate, h.beta1, h.beta2);
    default:
      throw new Error(`no TF.js counterpart for ${kernel.name}`);
  }
}

let counter = 0;

/** Runs the same gradients through the kernel on `backend` and through TF.js; returns both results. */
function both(
  backend: KernelBackend,
  kernel: OptimizerKernel,
  param: number[],
  grads: number[][],
  hyper: OptimizerHyperparams,
) {
  const p = backend.allocate(param.length);
  p.set(param);
  const state = kernel.stateSlots.map(() => backend.allocate(p.length).fill(0));
  grads.forEach((g, i) => backend.update(kernel, p, p, Float32Array.from(g), state, hyper, i + 1));
  const got = p.slice();
  [p, ...state].forEach((a) => backend.free(a));

  const optimizer = tfOptimizer(kernel, hyper);
  const variable = tf.variable(tf.tensor1d(param), true, `w${counter++}`);
  for (const g of grads) {
    const grad = tf.tensor1d(g);
    optimizer.applyGradients({ [variable.name]: grad });
    grad.dispose();
  }
  const expected = variable.dataSync() as Float32Array;
  variable.dispose();
  optimizer.dispose();
  return { got, expected };
}

function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let d = 0;
  for (let i = 0; i < a.length; i++) d = Math.max(d, Math.abs(a[i] - b[i]));
  return d;
}

beforeAll(async () => {
  await tf.setBackend('cpu');
  // The first tensor prints a hint about the native Node.js backend; keep test output clean.
  const warn = console.warn;
  console.warn = () => undefined;
  tf.scalar(0).dispose();
  console.warn = warn;
});

describe.each(BACKENDS)('optimizer kernels against TensorFlow.js (%s)', (_name, backend) => {
  it('optimizer kernels - sgd matches tf.train.sgd', () => {
    fc.assert(
      fc.property(trajectory, learningRate, ({ param, grads }, lr) => {
        const { got, expected } = both(
          backend,
          sgdKernel,
          param,
          grads,
          resolveHyperparams(sgdKernel, { learningRate: lr }),
        );
        expect(maxAbsDiff(got, expected)).toBeLessThanOrEqual(1e-5);
      }),
      { numRuns: 60 },
    );
  });

  it('optimizer kernels - momentum matches tf.train.momentum, with and without Nesterov', () => {
    fc.assert(
      fc.property(
        trajectory,
        learningRate,
        fc.double({ min: 0, max: 0.99, noNaN: true }),
        fc.boolean(),
        ({ param, grads }, lr, momentum, useNesterov) => {
          const hyper = resolveHyperparams(momentumKernel, { learningRate: lr, momentum, useNesterov });
          const { got, expected } = both(backend, momentumKernel, param, grads, hyper);
          expect(maxAbsDiff(got, expected)).toBeLessThanOrEqual(1e-5);
        },
      ),
      { numRuns: 60 },
    );
  });

  it('optimizer kernels - adam matches tf.train.adam with its default epsilon', () => {
    fc.assert(
      fc.property(
        trajectory,
        learningRate,
        fc.double({ min: 0.5, max: 0.99, noNaN: true }),
        fc.double({ min: 0.9, max: 0.9999, noNaN: true }),
        ({ param, grads }, lr, beta1, beta2) => {
          const hyper = resolveHyperparams(adamKernel, { learningRate: lr, beta1, beta2 });
          const { got, expected } = both(backend, adamKernel, param, grads, hyper);
          expect(maxAbsDiff(got, expected)).toBeLessThanOrEqual(1e-5);
        },
      ),
      { numRuns: 60 },
    );
  });
});
