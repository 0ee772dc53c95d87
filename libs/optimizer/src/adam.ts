import { SQUARED_GRADIENT_FLOOR, type OptimizerHyperparams, type OptimizerKernel } from './kernel.js';

/**
 * Adam's floors, in magnitude: the first moment is stored as zero below `moment`, and the square
 * of the gradient that goes into the second moment is taken as at least `squaredGradient` (so
 * the second moment stays at least `(1 - beta2) * squaredGradient`). They keep the float32 SIMD
 * kernel (`simd/adam.wat`, which says why) from making subnormals as a learner's gradients
 * shrink, and what they change of an update is below the rounding of any parameter farther than
 * about 1e-18 from zero. The plain kernel applies the same floors, so both keep the same state.
 */
export const ADAM_FLOORS = { moment: 2 ** -100, squaredGradient: SQUARED_GRADIENT_FLOOR } as const;

const sqrt = Math.sqrt;

/** The last `base ** exponent` computed per float32 base. */
const float32Powers = new Map<number, { exponent: number; value: number }>();

/**
 * `base ** exponent` computed the way TensorFlow.js accumulates Adam's `accBeta` scalars: one
 * float32 multiplication per step. The last result per base is kept, so consecutive steps cost
 * one multiplication each.
 */
function float32Power(base: number, exponent: number): number {
  const b = Math.fround(base);
  let cached = float32Powers.get(b);
  if (!cached || cached.exponent > exponent) cached = { exponent: 1, value: b };
  let { exponent: e, value } = cached;
  while (e < exponent) {
    value = Math.fround(value * b);
    e += 1;
  }
  float32Powers.set(b, { exponent: e, value });
  return value;
}

/** The scalars of one Adam step, each a float32 value as TensorFlow.js has it. */
export interface AdamScalars {
  beta1: number;
  beta2: number;
  /** `1 - beta1`. */
  oneMinusBeta1: number;
  /** `1 - beta2`. */
  oneMinusBeta2: number;
  /** `1 - beta1^step`. */
  correction1: number;
  /** `1 - beta2^step`. */
  correction2: number;
  /**
   * The step's learning rate with both bias corrections folded in,
   * `learningRate * sqrt(1 - beta2^step) / (1 - beta1^step)`, in float32.
   */
  stepSize: number;
  /** Epsilon on the scale of the uncorrected `sqrt(v)`: `epsilon * sqrt(1 - beta2^step)`, in float32. */
  epsilonHat: number;
}

/**
 * The float32 scalars of Adam's step `step` (1 on the first). TensorFlow.js takes `1 - beta`
 * in float64 before rounding, but `beta` itself in float32, and accumulates `beta^t` by float32
 * multiplications; its bias corrections are computed in float32, whose cancellation dominates
 * the difference otherwise.
 */
export function adamScalars(hyper: Readonly<OptimizerHyperparams>, step: number): AdamScalars {
  const beta1 = Math.fround(hyper.beta1);
  const beta2 = Math.fround(hyper.beta2);
  const correction1 = Math.fround(1 - float32Power(beta1, step));
  const correction2 = Math.fround(1 - float32Power(beta2, step));
  const rootCorrection2 = sqrt(correction2);
  return {
    beta1,
    beta2,
    oneMinusBeta1: Math.fround(1 - hyper.beta1),
    oneMinusBeta2: Math.fround(1 - hyper.beta2),
    correction1,
    correction2,
    stepSize: Math.fround((hyper.learningRate * rootCorrection2) / correction1),
    epsilonHat: Math.fround(hyper.epsilon * rootCorrection2),
  };
}

/**
 * One Adam step over a parameter, shared by `adam` and `adamw`: `l2 * param` is added to the
 * gradient (L2 weight decay) and `decay * param` is taken off the parameter before the update
 * (decoupled weight decay); each kernel passes zero for the other. The update is taken as
 * TensorFlow's own `ApplyAdam` kernel orders it, `stepSize * m / (sqrt(v) + epsilonHat)` with
 * the bias corrections folded into the two scalars (see `AdamScalars`): the same value as
 * `lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + epsilon)` up to rounding, at one division and
 * one square root an element instead of three divisions and one.
 */
export function adamUpdate(
  param: Float32Array,
  grad: Float32Array,
  state: readonly Float32Array[],
  hyper: Readonly<OptimizerHyperparams>,
  step: number,
  l2: number,
  decay: number,
): void {
  const [m, v] = state;
  const { beta1: b1, beta2: b2, oneMinusBeta1: c1, oneMinusBeta2: c2, stepSize, epsilonHat } = adamScalars(hyper, step);
  const { moment: mFloor, squaredGradient: g2Floor } = ADAM_FLOORS;
  for (let i = 0; i < param.length; i++) {
    const p = param[i];
    // A decay of zero adds nothing, not even zero times a parameter that is not finite.
    const g = l2 === 0 ? grad[i] : grad[i] + l2 * p;
    let mi = b1 * m[i] + c1 * g;
    const g2 = g * g;
    // The floors (NaN stays: it compares false).
    const vi = b2 * v[i] + c2 * (g2 < g2Floor ? g2Floor : g2);
    if (Math.abs(mi) < mFloor) mi = 0;
    m[i] = mi;
    v[i] = vi;
    param[i] = (decay === 0 ? p : p - p * decay) - (stepSize * mi) / (sqrt(vi) + epsilonHat);
  }
}

/**
 * Adam with bias correction, as `tf.train.adam`: `m = b1 * m + (1 - b1) * g`,
 * `v = b2 * v + (1 - b2) * g^2`, then
 * `param -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + epsilon)` (computed in the cheaper order of
 * `adamUpdate`). The default epsilon is
 * TensorFlow.js's float32 backend epsilon, 1e-7. The bias corrections `1 - b^t` are computed in
 * float32 like TensorFlow.js does, since their cancellation dominates the difference otherwise.
 * The L2 weight decay `weightDecay * param` is added to the gradient first. The first moment is
 * stored as zero below a floor and the squared gradient taken as at least one (`ADAM_FLOORS`).
 */
export const adamKernel: OptimizerKernel = {
  name: 'adam',
  stateSlots: ['m', 'v'],
  defaults: { learningRate: 0.001, beta1: 0.9, beta2: 0.999, epsilon: 1e-7 },
  apply(param, grad, state, hyper, step) {
    adamUpdate(param, grad, state, hyper, step, hyper.weightDecay, 0);
  },
};
