/**
 * `#libs/optimizer`: the parameter server's math. Optimizer kernels (one file per optimizer,
 * registered in `registry.ts`) as plain JavaScript, their WebAssembly SIMD128 counterparts
 * (`simd/`, registered in `simd/registry.ts`), the sample-weighted gradient sum of a
 * synchronous step, the finite check on gradients and the scaled delta of a `local` round; a
 * {@link KernelBackend} runs either kind, chosen by {@link selectKernelBackend}.
 */
export { adagradKernel } from './adagrad.js';
export { addScaled } from './add-scaled.js';
export { ADAM_FLOORS, adamKernel, adamScalars } from './adam.js';
export { adamwKernel } from './adamw.js';
export { InvalidHyperparameterError, UnknownOptimizerError } from './errors.js';
export { allFinite } from './finite-check.js';
export { Float64GradientSum } from './gradient-sum.js';
export { jsKernelBackend } from './js-backend.js';
export { defaultKernelBackend, selectKernelBackend } from './kernel-selection.js';
export {
  CONSTANT_SCHEDULE,
  DEFAULT_STEP_FACTOR,
  LEARNING_RATE_SCHEDULES,
  resolveLearningRateSchedule,
  scheduledLearningRate,
} from './learning-rate-schedule.js';
export { momentumKernel } from './momentum.js';
export {
  DEFAULT_HYPERPARAMS,
  OPTIMIZER_KERNELS,
  createOptimizerState,
  getOptimizerKernel,
  optimizerStateSlots,
  resolveHyperparams,
} from './registry.js';
export { rmspropKernel, rmspropScalars } from './rmsprop.js';
export { sgdKernel } from './sgd.js';
export { SimdKernelBackend, loadSimdKernelBackend } from './simd/simd-backend.js';
export { SIMD_OPTIMIZER_KERNELS } from './simd/registry.js';
export type { AdamScalars } from './adam.js';
export { SQUARED_GRADIENT_FLOOR } from './kernel.js';
export type { OptimizerHyperparams, OptimizerKernel } from './kernel.js';
export type { LearningRateSchedule } from './learning-rate-schedule.js';
export type { GradientSum, KernelBackend, KernelBackendName } from './kernel-backend.js';
export type { KernelSelection } from './kernel-selection.js';
export { unsharedModuleOf } from './simd/simd-kernel.js';
export type { SimdOptimizerKernel } from './simd/simd-kernel.js';
