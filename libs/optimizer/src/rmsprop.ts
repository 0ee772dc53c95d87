import {
  FLOAT32_MIN_NORMAL,
  SQUARED_GRADIENT_FLOOR,
  type OptimizerHyperparams,
  type OptimizerKernel,
} from './kernel.js';

const { max, sqrt } = Math;

/** `decay` and `1 - decay` as the float32 scalars TensorFlow.js multiplies by. */
export function rmspropScalars(hyper: Readonly<OptimizerHyperparams>): { decay: number; oneMinusDecay: number } {
  return { decay: Math.fround(hyper.decay), oneMinusDecay: Math.fround(1 - hyper.decay) };
}

const PLAIN_SLOTS = ['meanSquare', 'moment'] as const;
const CENTERED_SLOTS = [...PLAIN_SLOTS, 'meanGradient'] as const;

/**
 * RMSProp, as `tf.train.rmsprop`: `ms = decay * ms + (1 - decay) * grad^2`, then
 * `mom = momentum * mom + lr * grad / sqrt(ms + epsilon)` and `param -= mom`. Centered, it also
 * keeps `mg = decay * mg + (1 - decay) * grad` and divides by `sqrt(ms - mg^2 + epsilon)`, the
 * formula of TensorFlow's `ApplyCenteredRMSProp` (TensorFlow.js subtracts epsilon there
 * instead, which takes the square root of a negative number once the variance falls below
 * epsilon), with `ms - mg^2` held at zero or above where rounding would take it below. The mean
 * gradient is kept only when centered. The L2 weight decay `weightDecay * param` is added to the
 * gradient first. State below the smallest normal float32 is stored as zero (see `FLOAT32_MIN_NORMAL`),
 * and the squares of the gradient and of the mean gradient are taken as at least
 * `SQUARED_GRADIENT_FLOOR`.
 */
export const rmspropKernel: OptimizerKernel = {
  name: 'rmsprop',
  stateSlots: CENTERED_SLOTS,
  defaults: { learningRate: 0.001, decay: 0.9, momentum: 0, epsilon: 1e-7, centered: false },
  slotsFor: (hyper) => (hyper.centered ? CENTERED_SLOTS : PLAIN_SLOTS),
  apply(param, grad, state, hyper) {
    const [ms, mom, mg] = state;
    const lr = hyper.learningRate;
    const m = hyper.momentum;
    const eps = hyper.epsilon;
    const wd = hyper.weightDecay;
    const { decay: d, oneMinusDecay: c } = rmspropScalars(hyper);
    const tiny = FLOAT32_MIN_NORMAL;
    const g2Floor = SQUARED_GRADIENT_FLOOR;
    if (hyper.centered) {
      for (let i = 0; i < param.length; i++) {
        const g = grad[i] + wd * param[i];
        // The floors of the squares (NaN stays: it compares false).
        const g2 = g * g;
        let s = ms[i] * d + (g2 < g2Floor ? g2Floor : g2) * c;
        let a = mg[i] * d + g * c;
        const a2 = a * a;
        const variance = s - (a2 < g2Floor ? g2Floor : a2);
        // Stored as zero below the smallest normal float32 (s is never negative; NaN stays).
        if (s < tiny) s = 0;
        if (Math.abs(a) < tiny) a = 0;
        let o = mom[i] * m + (g * lr) / sqrt(max(variance, 0) + eps);
        if (Math.abs(o) < tiny) o = 0;
        ms[i] = s;
        mg[i] = a;
        mom[i] = o;
        param[i] -= o;
      }
    } else {
      for (let i = 0; i < param.length; i++) {
        const g = grad[i] + wd * param[i];
        const g2 = g * g;
        let s = ms[i] * d + (g2 < g2Floor ? g2Floor : g2) * c;
        if (s < tiny) s = 0;
        let o = mom[i] * m + (g * lr) / sqrt(s + eps);
        if (Math.abs(o) < tiny) o = 0;
        ms[i] = s;
        mom[i] = o;
        param[i] -= o;
      }
    }
  },
};
