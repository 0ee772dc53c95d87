import { FLOAT32_MIN_NORMAL, type OptimizerKernel } from './kernel.js';

/**
 * SGD with momentum (as `tf.train.momentum`): `acc = momentum * acc + grad`, then
 * `param -= lr * acc`, or with Nesterov `param -= lr * (grad + momentum * acc)`. The L2 weight
 * decay `weightDecay * param` is added to the gradient first. An accumulation below the smallest
 * normal float32 is stored as zero (see `FLOAT32_MIN_NORMAL`).
 */
export const momentumKernel: OptimizerKernel = {
  name: 'momentum',
  stateSlots: ['accumulation'],
  defaults: { learningRate: 0.01, momentum: 0.9, useNesterov: false },
  apply(param, grad, state, hyper) {
    const acc = state[0];
    const lr = hyper.learningRate;
    const m = hyper.momentum;
    const wd = hyper.weightDecay;
    const tiny = FLOAT32_MIN_NORMAL;
    if (hyper.useNesterov) {
      for (let i = 0; i < param.length; i++) {
        const g = grad[i] + wd * param[i];
        let a = m * acc[i] + g;
        if (Math.abs(a) < tiny) a = 0;
        acc[i] = a;
        param[i] -= lr * (g + m * a);
      }
    } else {
      for (let i = 0; i < param.length; i++) {
        let a = m * acc[i] + (grad[i] + wd * param[i]);
        if (Math.abs(a) < tiny) a = 0;
        acc[i] = a;
        param[i] -= lr * a;
      }
    }
  },
};
