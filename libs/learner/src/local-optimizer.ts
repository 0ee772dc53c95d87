import * as tf from '@tensorflow/tfjs';
import { LOCAL_OPTIMIZER_TYPES, type OptimizerSpec, type RmspropOptimizerSpec } from '#libs/job-spec';
import { SIMD_OPTIMIZER_KERNELS, getOptimizerKernel, resolveHyperparams } from '#libs/optimizer';
import { WasmHeapOptimizer } from './kernels/heap-optimizer.js';
import { simdKernelsFor } from './kernels/kernel-path.js';
import type { WasmHeapBackend } from './kernels/wasm-heap.js';

/** How a `local` trainer's optimizer runs. */
export type LocalOptimizerPath = 'wasm-simd' | 'tfjs';

/**
 * The optimizer a `local` trainer steps its own copy with. Its state (momenta, moment
 * estimates) lives on the trainer and carries over from one round to the next, as in local Adam.
 */
export interface LocalOptimizer {
  /**
   * `wasm-simd`: the parameter servers' SIMD128 kernel, run on the wasm backend's heap;
   * `tfjs`: TensorFlow.js's own optimizer (other backends, or the plain JavaScript kernel path).
   */
  readonly path: LocalOptimizerPath;
  /** On the `tfjs` path of the wasm backend: why our kernel does not run. */
  readonly reason?: string;
  /** One update of every variable from its gradient. */
  applyGradients(variables: readonly tf.Variable[], gradients: readonly tf.Tensor[]): void;
  dispose(): void;
}

/** A TF.js optimizer as a {@link LocalOptimizer}. */
export function tfjsLocalOptimizer(optimizer: tf.Optimizer): LocalOptimizer {
  return {
    path: 'tfjs',
    applyGradients: (variables, gradients) =>
      optimizer.applyGradients(variables.map((v, i) => ({ name: v.name, tensor: gradients[i]! }))),
    dispose: () => optimizer.dispose(),
  };
}

/**
 * The optimizer of a `local` trainer's steps, as the job's optimizer spec describes it. On the
 * wasm backend with our SIMD128 kernels on, the parameter servers' own kernel stepping the
 * variables in place (the same float32 arithmetic, one call per variable); elsewhere TF.js's
 * counterpart, or undefined for `sgd` (the learner then steps `w -= lr * g` itself).
 * @throws RangeError for an optimizer a trainer cannot run (see `LOCAL_OPTIMIZER_TYPES`).
 */
export function localOptimizerFor(spec: OptimizerSpec): LocalOptimizer | undefined {
  if (!LOCAL_OPTIMIZER_TYPES.includes(spec.type)) {
    throw new RangeError(
      `optimizer ${spec.type} cannot run on a trainer; local mode takes ${LOCAL_OPTIMIZER_TYPES.join(', ')}`,
    );
  }
  if (tf.getBackend() !== 'wasm') return tfjsLocalOptimizerFor(spec);
  const onHeap = onWasmHeap(spec);
  if (typeof onHeap !== 'string') return onHeap;
  const fallback = tfjsLocalOptimizerFor(spec);
  return fallback && { ...fallback, reason: onHeap };
}

/** The SIMD128 kernel on the wasm backend's heap, or why it cannot run there. */
function onWasmHeap(spec: OptimizerSpec): LocalOptimizer | string {
  const backend = tf.backend() as unknown as WasmHeapBackend;
  // The kernel path of the learner's own kernels: `TRIBUTARY_KERNELS=js` and a backend memory
  // our modules cannot import turn both off.
  if (simdKernelsFor(backend) === undefined) return 'the plain JavaScript kernel path is in use';
  const kernel = getOptimizerKernel(spec.type);
  const config = SIMD_OPTIMIZER_KERNELS.find((k) => k.kernel === kernel);
  if (config === undefined) return `${spec.type} has no SIMD128 kernel`;
  const { type: _type, schedule: _schedule, clipNorm: _clipNorm, clipValue: _clipValue, ...hyper } = spec;
  try {
    return new WasmHeapOptimizer(backend, config, resolveHyperparams(kernel, hyper));
  } catch (err) {
    return (err as Error).message;
  }
}

/**
 * The optimizer of a `local` trainer's steps in TF.js, whatever the backend: its `tf.train`
 * counterpart (centered RMSProp in TF.js ops, see {@link centeredRmsprop}), or undefined for
 * `sgd`.
 */
export function tfjsLocalOptimizerFor(spec: OptimizerSpec): LocalOptimizer | undefined {
  switch (spec.type) {
    case 'momentum':
      return tfjsLocalOptimizer(tf.train.momentum(spec.learningRate, spec.momentum, spec.useNesterov));
    case 'adam':
      return tfjsLocalOptimizer(tf.train.adam(spec.learningRate, spec.beta1, spec.beta2, spec.epsilon));
    case 'adagrad':
      return tfjsLocalOptimizer(tf.train.adagrad(spec.learningRate, spec.initialAccumulatorValue));
    case 'rmsprop':
      if (spec.centered) return centeredRmsprop(spec);
      return tfjsLocalOptimizer(tf.train.rmsprop(spec.learningRate, spec.decay, spec.momentum, spec.epsilon, false));
    default:
      return undefined;
  }
}

/**
 * Centered RMSProp in TF.js ops, as TensorFlow's `ApplyCenteredRMSProp` and the parameter
 * servers compute it: `tf.train.rmsprop` with `centered` subtracts epsilon under the square root
 * instead of adding it, which turns a parameter to NaN as soon as its gradient's variance falls
 * under epsilon (a gradient below about 1e-3 on the first step).
 */
function centeredRmsprop(spec: RmspropOptimizerSpec): LocalOptimizer {
  const slots = new Map<string, tf.Variable[]>();
  const slotsOf = (variable: tf.Variable): tf.Variable[] => {
    let kept = slots.get(variable.name);
    if (kept === undefined) {
      // Mean square, mean gradient, momentum; variables, which tf.tidy leaves alone.
      kept = [0, 1, 2].map(() => tf.variable(tf.zerosLike(variable), false));
      slots.set(variable.name, kept);
    }
    return kept;
  };
  return {
    path: 'tfjs',
    applyGradients(variables, gradients) {
      variables.forEach((variable, i) => {
        const grad = gradients[i]!;
        const [meanSquare, meanGrad, momentum] = slotsOf(variable) as [tf.Variable, tf.Variable, tf.Variable];
        tf.tidy(() => {
          const newMeanSquare = tf.add(tf.mul(meanSquare, spec.decay), tf.mul(tf.square(grad), 1 - spec.decay));
          const newMeanGrad = tf.add(tf.mul(meanGrad, spec.decay), tf.mul(grad, 1 - spec.decay));
          const denominator = tf.sqrt(tf.add(tf.sub(newMeanSquare, tf.square(newMeanGrad)), spec.epsilon));
          const newMomentum = tf.add(
            tf.mul(momentum, spec.momentum),
            tf.div(tf.mul(grad, spec.learningRate), denominator),
          );
          meanSquare.assign(newMeanSquare);
          meanGrad.assign(newMeanGrad);
          momentum.assign(newMomentum);
          variable.assign(tf.sub(variable, newMomentum));
        });
      });
    },
    dispose() {
      for (const kept of slots.values()) tf.dispose(kept);
      slots.clear();
    },
  };
}
