import { adamUpdate } from './adam.js';
import type { OptimizerHyperparams, OptimizerKernel } from './kernel.js';

/**
 * The fraction of each weight that AdamW's decoupled weight decay takes off in one step,
 * `learningRate * weightDecay`, as a float32 value.
 */
export function adamwDecay(hyper: Readonly<OptimizerHyperparams>): number {
  return Math.fround(hyper.learningRate * hyper.weightDecay);
}

/**
 * Adam with decoupled weight decay (Loshchilov and Hutter), as Keras's `AdamW`: each step first
 * takes `learningRate * weightDecay * param` off the parameter, then applies Adam's update
 * (`adam.ts`) to the gradient as it came. The decay follows the learning rate's schedule.
 */
export const adamwKernel: OptimizerKernel = {
  name: 'adamw',
  stateSlots: ['m', 'v'],
  defaults: { learningRate: 0.001, beta1: 0.9, beta2: 0.999, epsilon: 1e-7, weightDecay: 0.004 },
  apply(param, grad, state, hyper, step) {
    adamUpdate(param, grad, state, hyper, step, 0, adamwDecay(hyper));
  },
};
