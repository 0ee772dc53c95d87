import { adagradKernel } from '../adagrad.js';
import type { SimdOptimizerKernel } from './simd-kernel.js';

/** Adagrad in SIMD128 (`adagrad.wat`), as `adagrad.ts`. */
export const adagradSimdKernel: SimdOptimizerKernel = {
  kernel: adagradKernel,
  module: new URL('./adagrad.wasm', import.meta.url),
  entries: ['adagrad'],
  call: (hyper) => ({ entry: 'adagrad', scalars: [hyper.learningRate, hyper.epsilon, hyper.weightDecay] }),
};
