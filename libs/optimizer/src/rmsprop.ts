import { flushSubnormal, type OptimizerHyperparams, type OptimizerKernel } from './kernel.js';

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
 * gradient first. State below the smallest normal float32 is stored as zero (`flushSubnormal`).
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
    if (hyper.centered) {
      for (let i = 0; i < param.length; i++) {
        const g = grad[i] + wd * param[i];
        const s = flushSubnormal(ms[i] * d + g * g * c);
        const a = flushSubnormal(mg[i] * d + g * c);
        const o = flushSubnormal(mom[i] * m + (g * lr) / sqrt(max(s - a * a, 0) + eps));
        ms[i] = s;
        mg[i] = a;
        mom[i] = o;
        param[i] -= o;
      }
    } else {
      for (let i = 0; i < param.length; i++) {
        const g = grad[i] + wd * param[i];
        const s = flushSubnormal(ms[i] * d + g * g * c);
        const o = flushSubnormal(mom[i] * m + (g * lr) / sqrt(s + eps));
        ms[i] = s;
        mom[i] = o;
        param[i] -= o;
      }
    }
  },
};
