import { adagradKernel } from './adagrad.js';
import { adamKernel } from './adam.js';
import { adamwKernel } from './adamw.js';
import { InvalidHyperparameterError, UnknownOptimizerError } from './errors.js';
import type { OptimizerHyperparams, OptimizerKernel } from './kernel.js';
import { momentumKernel } from './momentum.js';
import { rmspropKernel } from './rmsprop.js';
import { sgdKernel } from './sgd.js';

/** Every optimizer kernel, by registration order. */
export const OPTIMIZER_KERNELS: readonly OptimizerKernel[] = [
  sgdKernel,
  momentumKernel,
  adamKernel,
  adagradKernel,
  rmspropKernel,
  adamwKernel,
];

/** Hyperparameter values used when neither the spec nor the kernel gives one. */
export const DEFAULT_HYPERPARAMS: Readonly<OptimizerHyperparams> = {
  learningRate: 0.01,
  momentum: 0.9,
  useNesterov: false,
  beta1: 0.9,
  beta2: 0.999,
  epsilon: 1e-7,
  initialAccumulatorValue: 0.1,
  decay: 0.9,
  centered: false,
  weightDecay: 0,
};

/** The kernel registered under `name`; `UnknownOptimizerError` otherwise. */
export function getOptimizerKernel(name: string): OptimizerKernel {
  const kernel = OPTIMIZER_KERNELS.find((k) => k.name === name);
  if (!kernel)
    throw new UnknownOptimizerError(
      name,
      OPTIMIZER_KERNELS.map((k) => k.name),
    );
  return kernel;
}

/**
 * Merges spec values over the kernel's defaults over `DEFAULT_HYPERPARAMS`, and checks them:
 * a positive finite learning rate, decays in [0, 1), a positive epsilon, a weight decay and an
 * initial accumulator value of zero or more.
 */
export function resolveHyperparams(
  kernel: OptimizerKernel,
  given: Partial<OptimizerHyperparams> = {},
): OptimizerHyperparams {
  const defined = Object.fromEntries(Object.entries(given).filter(([, v]) => v !== undefined));
  const hyper: OptimizerHyperparams = { ...DEFAULT_HYPERPARAMS, ...kernel.defaults, ...defined };
  const finite = (field: keyof OptimizerHyperparams, value: unknown): number => {
    if (typeof value !== 'number' || !Number.isFinite(value)) {
      throw new InvalidHyperparameterError(field, value, 'expected a finite number');
    }
    return value;
  };
  if (finite('learningRate', hyper.learningRate) <= 0) {
    throw new InvalidHyperparameterError('learningRate', hyper.learningRate, 'must be > 0');
  }
  for (const field of ['momentum', 'beta1', 'beta2', 'decay'] as const) {
    const v = finite(field, hyper[field]);
    if (v < 0 || v >= 1) throw new InvalidHyperparameterError(field, v, 'must be in [0, 1)');
  }
  if (finite('epsilon', hyper.epsilon) <= 0) {
    throw new InvalidHyperparameterError('epsilon', hyper.epsilon, 'must be > 0');
  }
  for (const field of ['weightDecay', 'initialAccumulatorValue'] as const) {
    if (finite(field, hyper[field]) < 0) throw new InvalidHyperparameterError(field, hyper[field], 'must be >= 0');
  }
  for (const field of ['useNesterov', 'centered'] as const) {
    if (typeof hyper[field] !== 'boolean') {
      throw new InvalidHyperparameterError(field, hyper[field], 'expected true or false');
    }
  }
  return hyper;
}

/** The state slots `kernel` keeps under `hyper`, in the order `apply` receives them. */
export function optimizerStateSlots(kernel: OptimizerKernel, hyper: Readonly<OptimizerHyperparams>): readonly string[] {
  return kernel.slotsFor?.(hyper) ?? kernel.stateSlots;
}

/**
 * Fresh state arrays for one parameter of `size` elements: one per slot `kernel` keeps under
 * `hyper` (its defaults when not given), each filled with the slot's value before the first
 * step. `allocate` gives each array (a kernel backend's `allocate` keeps them where its kernels
 * run).
 */
export function createOptimizerState(
  kernel: OptimizerKernel,
  size: number,
  hyper: Readonly<OptimizerHyperparams> = resolveHyperparams(kernel),
  allocate: (length: number) => Float32Array = (length) => new Float32Array(length),
): Float32Array[] {
  return optimizerStateSlots(kernel, hyper).map((slot) => allocate(size).fill(kernel.initialValue?.(slot, hyper) ?? 0));
}
