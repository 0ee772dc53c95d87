import { momentumKernel } from '../momentum.js';
import type { SimdOptimizerKernel } from './simd-kernel.js';

/** SGD with momentum in SIMD128 (`momentum.wat`), plain or Nesterov, as `momentum.ts`. */
export const momentumSimdKernel: SimdOptimizerKernel = {
  kernel: momentumKernel,
  module: new URL('./momentum.wasm', import.meta.url),
  entries: ['momentum', 'nesterov'],
  call: (hyper) => ({
    entry: hyper.useNesterov ? 'nesterov' : 'momentum',
    scalars: [hyper.learningRate, hyper.momentum, hyper.weightDecay],
  }),
};
