import { adamwDecay, adamwKernel } from '../adamw.js';
import { adamWatScalars } from './adam.js';
import type { SimdOptimizerKernel } from './simd-kernel.js';

/**
 * AdamW in SIMD128, as `adamw.ts`: Adam's module (`adam.wat`) with the decoupled weight decay
 * in place of the L2 one.
 */
export const adamwSimdKernel: SimdOptimizerKernel = {
  kernel: adamwKernel,
  module: new URL('./adam.wasm', import.meta.url),
  entries: ['adam'],
  call: (hyper, step) => ({ entry: 'adam', scalars: adamWatScalars(hyper, step, 0, adamwDecay(hyper)) }),
};
