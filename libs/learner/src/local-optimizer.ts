import * as tf from '@tensorflow/tfjs';
import { LOCAL_OPTIMIZER_TYPES, type OptimizerSpec } from '#libs/job-spec';

/**
 * The TF.js optimizer a `local` trainer steps its own copy with, as the job's optimizer spec
 * describes it; undefined for `sgd`, which the learner steps itself (a plain `w -= lr * g`).
 * Its state (momenta, moment estimates) lives on the trainer and carries over from one round
 * to the next, as in local Adam.
 * @throws RangeError for an optimizer without a TF.js counterpart.
 */
export function localOptimizerFor(spec: OptimizerSpec): tf.Optimizer | undefined {
  switch (spec.type) {
    case 'sgd':
      return undefined;
    case 'momentum':
      return tf.train.momentum(spec.learningRate, spec.momentum, spec.useNesterov);
    case 'adam':
      return tf.train.adam(spec.learningRate, spec.beta1, spec.beta2, spec.epsilon);
    case 'adagrad':
      return tf.train.adagrad(spec.learningRate, spec.initialAccumulatorValue);
    case 'rmsprop':
      return tf.train.rmsprop(spec.learningRate, spec.decay, spec.momentum, spec.epsilon, spec.centered);
    default:
      throw new RangeError(
        `optimizer ${spec.type} cannot run on a trainer; local mode takes ${LOCAL_OPTIMIZER_TYPES.join(', ')}`,
      );
  }
}
