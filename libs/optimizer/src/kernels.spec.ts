import fc from 'fast-check';
import {
  OPTIMIZER_KERNELS,
  UnknownOptimizerError,
  InvalidHyperparameterError,
  adagradKernel,
  adamKernel,
  adamwKernel,
  createOptimizerState,
  getOptimizerKernel,
  momentumKernel,
  optimizerStateSlots,
  resolveHyperparams,
  rmspropKernel,
  sgdKernel,
  type OptimizerHyperparams,
  type OptimizerKernel,
} from './index.js';

/** The gradient with the L2 weight decay of every kernel but adamw. */
const decayed = (p: number[], g: number[], h: OptimizerHyperparams) => g.map((x, i) => x + h.weightDecay * p[i]);

/** Adam's step on an already decayed gradient. */
function adamStep(p: number[], g: number[], s: number[][], h: OptimizerHyperparams, t: number): number[] {
  s[0] = s[0].map((m, i) => h.beta1 * m + (1 - h.beta1) * g[i]);
  s[1] = s[1].map((v, i) => h.beta2 * v + (1 - h.beta2) * g[i] ** 2);
  return p.map((x, i) => {
    const mHat = s[0][i] / (1 - h.beta1 ** t);
    const vHat = s[1][i] / (1 - h.beta2 ** t);
    return x - (h.learningRate * mHat) / (Math.sqrt(vHat) + h.epsilon);
  });
}

/** Textbook formulas over plain number arrays, one step at a time. */
const reference = {
  sgd(p: number[], g: number[], _s: number[][], h: OptimizerHyperparams): number[] {
    const d = decayed(p, g, h);
    return p.map((x, i) => x - h.learningRate * d[i]);
  },
  momentum(p: number[], g: number[], s: number[][], h: OptimizerHyperparams): number[] {
    const d = decayed(p, g, h);
    const acc = s[0].map((a, i) => h.momentum * a + d[i]);
    s[0] = acc;
    return p.map((x, i) =>
      h.useNesterov ? x - h.learningRate * (d[i] + h.momentum * acc[i]) : x - h.learningRate * acc[i],
    );
  },
  adam(p: number[], g: number[], s: number[][], h: OptimizerHyperparams, t: number): number[] {
    return adamStep(p, decayed(p, g, h), s, h, t);
  },
  adagrad(p: number[], g: number[], s: number[][], h: OptimizerHyperparams): number[] {
    const d = decayed(p, g, h);
    s[0] = s[0].map((a, i) => a + d[i] ** 2);
    return p.map((x, i) => x - (h.learningRate * d[i]) / Math.sqrt(s[0][i] + h.epsilon));
  },
  rmsprop(p: number[], g: number[], s: number[][], h: OptimizerHyperparams): number[] {
    const d = decayed(p, g, h);
    s[0] = s[0].map((ms, i) => h.decay * ms + (1 - h.decay) * d[i] ** 2);
    if (h.centered) s[2] = s[2].map((mg, i) => h.decay * mg + (1 - h.decay) * d[i]);
    const variance = s[0].map((ms, i) => (h.centered ? ms - s[2][i] ** 2 : ms));
    s[1] = s[1].map((mom, i) => h.momentum * mom + (h.learningRate * d[i]) / Math.sqrt(variance[i] + h.epsilon));
    return p.map((x, i) => x - s[1][i]);
  },
  adamw(p: number[], g: number[], s: number[][], h: OptimizerHyperparams, t: number): number[] {
    const shrunk = p.map((x) => x - h.learningRate * h.weightDecay * x);
    return adamStep(shrunk, g, s, h, t);
  },
} satisfies Record<string, (p: number[], g: number[], s: number[][], h: OptimizerHyperparams, t: number) => number[]>;

const value = fc.float({ min: -10, max: 10, noNaN: true, noDefaultInfinity: true }).map(Math.fround);

/** A parameter of 1..16 elements and 1..5 gradients of the same length. */
const trajectory = fc.integer({ min: 1, max: 16 }).chain((n) =>
  fc.record({
    param: fc.array(value, { minLength: n, maxLength: n }),
    grads: fc.array(fc.array(value, { minLength: n, maxLength: n }), { minLength: 1, maxLength: 5 }),
  }),
);

/**
 * Hyperparameters as float32 values. Adam's learning rate and beta2 stay in the range where
 * computing `1 - beta2^t` in float32 (as the kernel does) keeps within the tolerance of the exact
 * formula.
 */
const float32 = (min: number, max: number) => fc.double({ min, max, noNaN: true }).map(Math.fround);
const hyperparams = fc.record({
  learningRate: float32(1e-4, 0.05),
  momentum: float32(0, 0.99),
  useNesterov: fc.boolean(),
  beta1: float32(0.5, 0.95),
  beta2: float32(0.9, 0.999),
  epsilon: fc.constantFrom(1e-7, 1e-8, 1e-3),
  initialAccumulatorValue: float32(0, 1),
  decay: float32(0.5, 0.99),
  centered: fc.boolean(),
  weightDecay: fc.oneof(fc.constant(0), float32(0, 0.1)),
});

function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let d = 0;
  for (let i = 0; i < a.length; i++) d = Math.max(d, Math.abs(a[i] - b[i]));
  return d;
}

function runKernel(kernel: OptimizerKernel, param: number[], grads: number[][], hyper: OptimizerHyperparams) {
  const p = Float32Array.from(param);
  const state = createOptimizerState(kernel, p.length, hyper);
  grads.forEach((g, i) => kernel.apply(p, Float32Array.from(g), state, hyper, i + 1));
  return p;
}

describe('optimizer kernels', () => {
  it.each(OPTIMIZER_KERNELS.map((k) => [k.name, k] as const))(
    'optimizer kernels - %s matches the reference formulas',
    (name, kernel) => {
      fc.assert(
        fc.property(trajectory, hyperparams, ({ param, grads }, hyper) => {
          const got = runKernel(kernel, param, grads, hyper);
          let p = param;
          const state = createOptimizerState(kernel, param.length, hyper).map((slot) => Array.from(slot));
          grads.forEach((g, i) => {
            p = reference[name as keyof typeof reference](p, g, state, hyper, i + 1);
          });
          expect(maxAbsDiff(got, p)).toBeLessThanOrEqual(1e-5);
        }),
        { numRuns: 200 },
      );
    },
  );

  it('optimizer kernels - sgd takes one plain step', () => {
    const p = Float32Array.from([1, 2]);
    sgdKernel.apply(p, Float32Array.from([10, -10]), [], resolveHyperparams(sgdKernel, { learningRate: 0.1 }), 1);
    expect(Array.from(p)).toEqual([0, 3]);
  });

  it('optimizer kernels - adam moves each weight by about lr on its first step', () => {
    const p = Float32Array.from([0, 0]);
    const hyper = resolveHyperparams(adamKernel, { learningRate: 0.01 });
    adamKernel.apply(p, Float32Array.from([3, -0.5]), createOptimizerState(adamKernel, 2), hyper, 1);
    expect(p[0]).toBeCloseTo(-0.01, 6);
    expect(p[1]).toBeCloseTo(0.01, 6);
  });

  it('optimizer kernels - registry resolves names and refuses unknown ones', () => {
    expect(getOptimizerKernel('momentum')).toBe(momentumKernel);
    expect(getOptimizerKernel('adamw')).toBe(adamwKernel);
    expect(() => getOptimizerKernel('adadelta')).toThrow(UnknownOptimizerError);
    expect(() => getOptimizerKernel('adadelta')).toThrow(/adadelta.*sgd, momentum, adam, adagrad, rmsprop, adamw/);
  });

  it('optimizer kernels - adagrad state starts at the initial accumulator value', () => {
    const hyper = resolveHyperparams(adagradKernel, { learningRate: 0.1, initialAccumulatorValue: 0.5 });
    const [acc] = createOptimizerState(adagradKernel, 3, hyper);
    expect(Array.from(acc)).toEqual([0.5, 0.5, 0.5]);
    expect(Array.from(createOptimizerState(adagradKernel, 2)[0])).toEqual([0.1, 0.1].map(Math.fround));
  });

  it('optimizer kernels - rmsprop keeps the mean gradient only when centered', () => {
    const plain = resolveHyperparams(rmspropKernel, { learningRate: 0.1 });
    const centered = resolveHyperparams(rmspropKernel, { learningRate: 0.1, centered: true });
    expect(optimizerStateSlots(rmspropKernel, plain)).toEqual(['meanSquare', 'moment']);
    expect(optimizerStateSlots(rmspropKernel, centered)).toEqual(['meanSquare', 'moment', 'meanGradient']);
    expect(createOptimizerState(rmspropKernel, 4, centered)).toHaveLength(3);
    expect(plain).toMatchObject({ momentum: 0, decay: 0.9, centered: false });
  });

  it('optimizer kernels - weight decay: L2 pulls sgd toward zero, adamw shrinks each weight by lr * decay', () => {
    const p = Float32Array.of(2, -4);
    sgdKernel.apply(
      p,
      Float32Array.of(0, 0),
      [],
      resolveHyperparams(sgdKernel, { learningRate: 0.1, weightDecay: 0.5 }),
      1,
    );
    expect(Array.from(p)).toEqual([1.9, -3.8].map(Math.fround));
    const w = Float32Array.of(2, -4);
    const hyper = resolveHyperparams(adamwKernel, { learningRate: 0.1, weightDecay: 0.5 });
    adamwKernel.apply(w, Float32Array.of(0, 0), createOptimizerState(adamwKernel, 2, hyper), hyper, 1);
    expect(Array.from(w)).toEqual([1.9, -3.8].map(Math.fround));
    expect(resolveHyperparams(adamwKernel).weightDecay).toBe(0.004);
    expect(resolveHyperparams(adamKernel).weightDecay).toBe(0);
  });

  it('optimizer kernels - hyperparameters take spec values over kernel defaults', () => {
    const h = resolveHyperparams(adamKernel, { learningRate: 0.5, beta1: undefined });
    expect(h).toMatchObject({ learningRate: 0.5, beta1: 0.9, beta2: 0.999, epsilon: 1e-7 });
    expect(resolveHyperparams(sgdKernel).learningRate).toBe(0.01);
    expect(() => resolveHyperparams(sgdKernel, { learningRate: -1 })).toThrow(InvalidHyperparameterError);
    expect(() => resolveHyperparams(momentumKernel, { momentum: 1 })).toThrow(/optimizer.momentum = 1/);
    expect(() => resolveHyperparams(adamKernel, { epsilon: Number.NaN })).toThrow(/finite/);
    expect(() => resolveHyperparams(rmspropKernel, { decay: 1 })).toThrow(/optimizer.decay = 1: must be in \[0, 1\)/);
    expect(() => resolveHyperparams(sgdKernel, { weightDecay: -0.1 })).toThrow(
      /optimizer.weightDecay = -0.1: must be >= 0/,
    );
    expect(() => resolveHyperparams(adagradKernel, { initialAccumulatorValue: -1 })).toThrow(/must be >= 0/);
    expect(() => resolveHyperparams(rmspropKernel, { centered: 'yes' as unknown as boolean })).toThrow(/true or false/);
  });
});
