/**
 * Hyperparameters of every optimizer kernel, fully resolved (a kernel reads the ones it needs).
 * Names and defaults follow TensorFlow.js's `tf.train.*` constructors.
 */
export interface OptimizerHyperparams {
  learningRate: number;
  /** Momentum coefficient (`momentum` and `rmsprop` kernels). */
  momentum: number;
  /** Nesterov momentum (`momentum` kernel). */
  useNesterov: boolean;
  /** Exponential decay of the first moment (`adam` and `adamw` kernels). */
  beta1: number;
  /** Exponential decay of the second moment (`adam` and `adamw` kernels). */
  beta2: number;
  /** Added to the denominator for numerical stability (`adam`, `adamw`, `adagrad`, `rmsprop`). */
  epsilon: number;
  /** Starting value of the sum of squared gradients (`adagrad` kernel). */
  initialAccumulatorValue: number;
  /** Exponential decay of the mean square of the gradients (`rmsprop` kernel). */
  decay: number;
  /** Divide by the gradient's estimated variance rather than its mean square (`rmsprop` kernel). */
  centered: boolean;
  /**
   * Weight decay: added to the gradient as `weightDecay * param` (L2) by every kernel except
   * `adamw`, which subtracts `learningRate * weightDecay * param` from the parameter instead
   * (decoupled weight decay).
   */
  weightDecay: number;
}

/**
 * The smallest normal float32, 2^-126. The kernels store decaying state (moments, momentum)
 * below it in magnitude as zero (NaN is kept), as TensorFlow runs its CPU kernels with
 * flush-to-zero: the state of a parameter whose gradient stays zero would sink into the
 * subnormal range and stay there (a decayed smallest subnormal rounds back to itself), and every
 * operation on a subnormal float32 costs x86 a microcode assist, which doubled the time of the
 * SIMD Adam step of the example MLP. What the flush changes of an update is below the rounding of
 * any parameter farther than about 1e-28 from zero. The plain kernels compare against a local
 * copy of it inside their loops: called as a function imported from here, the check made the
 * plain Adam loop 1.7 times as slow. Adam holds its first moment to a higher floor (`ADAM_FLOORS`),
 * and the kernels that square gradients take each square as at least {@link SQUARED_GRADIENT_FLOOR},
 * so that none of their operations makes a subnormal either.
 */
export const FLOAT32_MIN_NORMAL = 2 ** -126;

/**
 * The least a squared gradient is taken as by Adam, RMSProp and Adagrad, 2^-112: the square of a
 * gradient under 2^-63 in magnitude is subnormal in float32, and a learner's gradients get there as
 * it trains (a unit that no longer fires, an example it has learnt). The SIMD kernels take the
 * gradient's magnitude as at least 2^-56 before squaring it (`f32x4.pmax`, one instruction); the
 * squared term then stays normal, and so does state that decays by at most 1 - 2^-14 a step while
 * the term is added to it. Under these optimizers' square roots, what it adds is far below epsilon
 * (a root of 2^-56 against one of 1e-7 at least). With gradients of 1e-20, the SIMD RMSProp step
 * over the example MLP's 101,770 parameters took 279 µs without it and 75 µs with it, as it does
 * with normal gradients. The plain kernels apply the same floor, so both keep the same state.
 */
export const SQUARED_GRADIENT_FLOOR = 2 ** -112;

/**
 * One optimizer update, applied to a single parameter tensor in place.
 *
 * `state` holds one array per slot the kernel keeps under these hyperparameters (see
 * `slotsFor`), each as long as `param` and holding the slot's initial value (zero unless
 * `initialValue` says otherwise) before the first step. `step` counts the updates applied to the
 * parameter including this one, so it is 1 on the first call.
 */
export interface OptimizerKernel {
  /** Name used in job specs (`optimizer.type`). */
  readonly name: string;
  /** Names of every per-parameter state array the kernel may keep, in the order `apply` receives them. */
  readonly stateSlots: readonly string[];
  /** Defaults for the hyperparameters this kernel reads. */
  readonly defaults: Partial<OptimizerHyperparams>;
  /**
   * The slots kept under `hyper`, when some are needed only by some settings: a prefix of
   * `stateSlots`. Every slot when absent.
   */
  slotsFor?(hyper: Readonly<OptimizerHyperparams>): readonly string[];
  /** A slot's value before the first step, when it is not zero. */
  initialValue?(slot: string, hyper: Readonly<OptimizerHyperparams>): number;
  apply(
    param: Float32Array,
    grad: Float32Array,
    state: readonly Float32Array[],
    hyper: Readonly<OptimizerHyperparams>,
    step: number,
  ): void;
}
