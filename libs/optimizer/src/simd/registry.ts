import { adagradSimdKernel } from './adagrad.js';
import { adamSimdKernel } from './adam.js';
import { adamwSimdKernel } from './adamw.js';
import { momentumSimdKernel } from './momentum.js';
import { rmspropSimdKernel } from './rmsprop.js';
import { sgdSimdKernel } from './sgd.js';
import type { SimdOptimizerKernel } from './simd-kernel.js';

/** Every optimizer kernel with a SIMD128 counterpart; the others run as plain JavaScript. */
export const SIMD_OPTIMIZER_KERNELS: readonly SimdOptimizerKernel[] = [
  sgdSimdKernel,
  momentumSimdKernel,
  adamSimdKernel,
  adagradSimdKernel,
  rmspropSimdKernel,
  adamwSimdKernel,
];
