import fc from 'fast-check';
import * as tf from '@tensorflow/tfjs';
import {
  adagradKernel,
  adamKernel,
  adamwKernel,
  createOptimizerState,
  jsKernelBackend,
  momentumKernel,
  resolveHyperparams,
  rmspropKernel,
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

/** One step of a parameter in TensorFlow.js. */
type TfStep = (variable: tf.Variable, grad: tf.Tensor) => void;

/**
 * The centered RMSProp of TensorFlow's `ApplyCenteredRMSProp` in TensorFlow.js ops (whose own
 * centered rmsprop subtracts epsilon under the square root instead of adding it).
 */
function centeredRmsprop(h: OptimizerHyperparams): { step: TfStep; dispose(): void } {
  const slots = new Map<string, tf.Variable[]>();
  return {
    step(variable, grad) {
      if (!slots.has(variable.name))
        slots.set(
          variable.name,
          [0, 1, 2].map(() => tf.variable(tf.zerosLike(variable))),
        );
      const [ms, mg, mom] = slots.get(variable.name)!;
      tf.tidy(() => {
        const newMs = tf.add(tf.mul(ms, h.decay), tf.mul(tf.square(grad), 1 - h.decay));
        const newMg = tf.add(tf.mul(mg, h.decay), tf.mul(grad, 1 - h.decay));
        const denominator = tf.sqrt(tf.add(tf.sub(newMs, tf.square(newMg)), h.epsilon));
        const newMom = tf.add(tf.mul(mom, h.momentum), tf.div(tf.mul(grad, h.learningRate), denominator));
        ms.assign(newMs);
        mg.assign(newMg);
        mom.assign(newMom);
        variable.assign(tf.sub(variable, newMom));
      });
    },
    dispose: () => [...slots.values()].flat().forEach((v) => v.dispose()),
  };
}

/**
 * The kernel's update in TensorFlow.js: its `tf.train` optimizer (or, for centered RMSProp,
 * TensorFlow's formula in ops), with the weight decay done in ops before it: `weightDecay *
 * param` added to the gradient, or for adamw `learningRate * weightDecay * param` taken off the
 * parameter (as Keras's AdamW does).
 */
function tfReference(kernel: OptimizerKernel, h: OptimizerHyperparams): { step: TfStep; dispose(): void } {
  const plain = (optimizer: tf.Optimizer) => ({
    step: (variable: tf.Variable, grad: tf.Tensor) => optimizer.applyGradients({ [variable.name]: grad }),
    dispose: () => optimizer.dispose(),
  });
  let inner: { step: TfStep; dispose(): void };
  switch (kernel.name) {
    case 'sgd':
      inner = plain(tf.train.sgd(h.learningRate));
      break;
    case 'momentum':
      inner = plain(tf.train.momentum(h.learningRate, h.momentum, h.useNesterov));
      break;
    case 'adam':
    case 'adamw':
      inner = plain(tf.train.adam(h.learningRate, h.beta1, h.beta2));
      break;
    case 'adagrad':
      inner = plain(tf.train.adagrad(h.learningRate, h.initialAccumulatorValue));
      break;
    case 'rmsprop':
      inner = h.centered
        ? centeredRmsprop(h)
        : plain(tf.train.rmsprop(h.learningRate, h.decay, h.momentum, h.epsilon, false));
      break;
    default:
      throw new Error(`no TF.js counterpart for ${kernel.name}`);
  }
  return {
    step(variable, grad) {
      if (kernel.name === 'adamw') {
        tf.tidy(() => variable.assign(tf.sub(variable, tf.mul(variable, h.learningRate * h.weightDecay))));
        inner.step(variable, grad);
        return;
      }
      const decayed = tf.tidy(() => tf.add(grad, tf.mul(variable, h.weightDecay)));
      inner.step(variable, decayed);
      decayed.dispose();
    },
    dispose: () => inner.dispose(),
  };
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
  const state = createOptimizerState(kernel, p.length, hyper, (n) => backend.allocate(n));
  grads.forEach((g, i) => backend.update(kernel, p, p, Float32Array.from(g), state, hyper, i + 1));
  const got = p.slice();
  [p, ...state].forEach((a) => backend.free(a));

  const reference = tfReference(kernel, hyper);
  const variable = tf.variable(tf.tensor1d(param), true, `w${counter++}`);
  for (const g of grads) {
    const grad = tf.tensor1d(g);
    reference.step(variable, grad);
    grad.dispose();
  }
  const expected = variable.dataSync() as Float32Array;
  variable.dispose();
  reference.dispose();
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

  it('optimizer kernels - adagrad matches tf.train.adagrad', () => {
    fc.assert(
      fc.property(
        trajectory,
        learningRate,
        fc.double({ min: 0, max: 1, noNaN: true }),
        ({ param, grads }, lr, initial) => {
          const hyper = resolveHyperparams(adagradKernel, { learningRate: lr, initialAccumulatorValue: initial });
          const { got, expected } = both(backend, adagradKernel, param, grads, hyper);
          expect(maxAbsDiff(got, expected)).toBeLessThanOrEqual(1e-5);
        },
      ),
      { numRuns: 60 },
    );
  });

  it('optimizer kernels - rmsprop matches tf.train.rmsprop, and centered the formula of TensorFlow', () => {
    fc.assert(
      fc.property(
        trajectory,
        learningRate,
        fc.double({ min: 0.5, max: 0.99, noNaN: true }),
        fc.double({ min: 0, max: 0.9, noNaN: true }),
        fc.constantFrom(1e-7, 1e-3),
        fc.boolean(),
        ({ param, grads }, lr, decay, momentum, epsilon, centered) => {
          const hyper = resolveHyperparams(rmspropKernel, { learningRate: lr, decay, momentum, epsilon, centered });
          const { got, expected } = both(backend, rmspropKernel, param, grads, hyper);
          expect(maxAbsDiff(got, expected)).toBeLessThanOrEqual(1e-5);
        },
      ),
      { numRuns: 60 },
    );
  });

  it('optimizer kernels - adamw matches tf.train.adam after the decoupled decay of each weight', () => {
    fc.assert(
      fc.property(
        trajectory,
        learningRate,
        fc.double({ min: 0, max: 0.1, noNaN: true }),
        ({ param, grads }, lr, weightDecay) => {
          const hyper = resolveHyperparams(adamwKernel, { learningRate: lr, weightDecay });
          const { got, expected } = both(backend, adamwKernel, param, grads, hyper);
          expect(maxAbsDiff(got, expected)).toBeLessThanOrEqual(1e-5);
        },
      ),
      { numRuns: 60 },
    );
  });

  it('optimizer kernels - L2 weight decay matches tf.train given the gradient plus weightDecay * param', () => {
    const kernels = fc.constantFrom(sgdKernel, momentumKernel, adamKernel, adagradKernel, rmspropKernel);
    fc.assert(
      fc.property(
        trajectory,
        learningRate,
        fc.double({ min: 0, max: 0.1, noNaN: true }),
        kernels,
        fc.boolean(),
        ({ param, grads }, lr, weightDecay, kernel, flag) => {
          const hyper = resolveHyperparams(kernel, {
            learningRate: lr,
            weightDecay,
            useNesterov: flag,
            centered: flag,
          });
          const { got, expected } = both(backend, kernel, param, grads, hyper);
          expect(maxAbsDiff(got, expected)).toBeLessThanOrEqual(1e-5);
        },
      ),
      { numRuns: 100 },
    );
  });
});
