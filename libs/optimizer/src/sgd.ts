import type { OptimizerKernel } from './kernel.js';

/**
 * Plain stochastic gradient descent: `param -= lr * grad` (as `tf.train.sgd`), with the L2 weight
 * decay `weightDecay * param` added to the gradient.
 */
export const sgdKernel: OptimizerKernel = {
  name: 'sgd',
  stateSlots: [],
  defaults: { learningRate: 0.01 },
  apply(param, grad, _state, hyper) {
    const lr = hyper.learningRate;
    const wd = hyper.weightDecay;
    for (let i = 0; i < param.length; i++) param[i] -= lr * (grad[i] + wd * param[i]);
  },
};
