export { adamKernel } from './adam.js';
export { InvalidHyperparameterError, UnknownOptimizerError } from './errors.js';
export { momentumKernel } from './momentum.js';
export {
  DEFAULT_HYPERPARAMS,
  OPTIMIZER_KERNELS,
  createOptimizerState,
  getOptimizerKernel,
  resolveHyperparams,
} from './registry.js';
export { sgdKernel } from './sgd.js';
export type { OptimizerHyperparams, OptimizerKernel } from './kernel.js';
