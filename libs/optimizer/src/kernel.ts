/**
 * Hyperparameters of every optimizer kernel, fully resolved (a kernel reads the ones it needs).
 * Names and defaults follow TensorFlow.js's `tf.train.*` constructors.
 */
export interface OptimizerHyperparams {
  learningRate: number;
  /** Momentum coefficient (`momentum` kernel). */
  momentum: number;
  /** Nesterov momentum (`momentum` kernel). */
  useNesterov: boolean;
  /** Exponential decay of the first moment (`adam` kernel). */
  beta1: number;
  /** Exponential decay of the second moment (`adam` kernel). */
  beta2: number;
  /** Added to the denominator for numerical stability (`adam` kernel). */
  epsilon: number;
}

/**
 * One optimizer update, applied to a single parameter tensor in place.
 *
 * `state` holds one array per entry of `stateSlots`, each as long as `param`, zero before the
 * first step. `step` counts the updates applied to the parameter including this one, so it is 1
 * on the first call.
 */
export interface OptimizerKernel {
  /** Name used in job specs (`optimizer.type`). */
  readonly name: string;
  /** Names of the per-parameter state arrays, in the order `apply` receives them. */
  readonly stateSlots: readonly string[];
  /** Defaults for the hyperparameters this kernel reads. */
  readonly defaults: Partial<OptimizerHyperparams>;
  apply(
    param: Float32Array,
    grad: Float32Array,
    state: readonly Float32Array[],
    hyper: Readonly<OptimizerHyperparams>,
    step: number,
  ): void;
}
