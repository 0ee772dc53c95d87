import { adamKernel } from './adam.js';
import { InvalidHyperparameterError, UnknownOptimizerError } from './errors.js';
import type { OptimizerHyperparams, OptimizerKernel } from './kernel.js';
import { momentumKernel } from './momentum.js';
import { sgdKernel } from './sgd.js';

/** Every optimizer kernel, by registration order. */
export const OPTIMIZER_KERNELS: readonly OptimizerKernel[] = [sgdKernel, momentumKernel, adamKernel];

/** Hyperparameter values used when neither the spec nor the kernel gives one. */
export const DEFAULT_HYPERPARAMS: Readonly<OptimizerHyperparams> = {
  learningRate: 0.01,
  momentum: 0.9,
  useNesterov: false,
  beta1: 0.9,
  beta2: 0.999,
  epsilon: 1e-7,
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
 * a positive finite learning rate, decays in [0, 1), a positive epsilon.
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
  for (const field of ['momentum', 'beta1', 'beta2'] as const) {
    const v = finite(field, hyper[field]);
    if (v < 0 || v >= 1) throw new InvalidHyperparameterError(field, v, 'must be in [0, 1)');
  }
  if (finite('epsilon', hyper.epsilon) <= 0) {
    throw new InvalidHyperparameterError('epsilon', hyper.epsilon, 'must be > 0');
  }
  if (typeof hyper.useNesterov !== 'boolean') {
    throw new InvalidHyperparameterError('useNesterov', hyper.useNesterov, 'expected true or false');
  }
  return hyper;
}

/** Fresh, zeroed state arrays for one parameter of `size` elements. */
export function createOptimizerState(kernel: OptimizerKernel, size: number): Float32Array[] {
  return kernel.stateSlots.map(() => new Float32Array(size));
}
