import { SQUARED_GRADIENT_FLOOR, type OptimizerKernel } from './kernel.js';

const sqrt = Math.sqrt;

/**
 * Adagrad, as `tf.train.adagrad`: `acc += grad^2`, then `param -= lr * grad / sqrt(acc + epsilon)`,
 * with the sum of squares starting at `initialAccumulatorValue`. The L2 weight decay
 * `weightDecay * param` is added to the gradient first. Each squared gradient is taken as at least
 * `SQUARED_GRADIENT_FLOOR`.
 */
export const adagradKernel: OptimizerKernel = {
  name: 'adagrad',
  stateSlots: ['accumulator'],
  defaults: { learningRate: 0.001, initialAccumulatorValue: 0.1, epsilon: 1e-7 },
  initialValue: (_slot, hyper) => hyper.initialAccumulatorValue,
  apply(param, grad, state, hyper) {
    const acc = state[0];
    const lr = hyper.learningRate;
    const eps = hyper.epsilon;
    const wd = hyper.weightDecay;
    const g2Floor = SQUARED_GRADIENT_FLOOR;
    for (let i = 0; i < param.length; i++) {
      const g = grad[i] + wd * param[i];
      const g2 = g * g;
      // The floor (NaN stays: it compares false).
      const a = acc[i] + (g2 < g2Floor ? g2Floor : g2);
      acc[i] = a;
      param[i] -= (g / sqrt(a + eps)) * lr;
    }
  },
};
