import { sgdKernel } from '../sgd.js';
import type { SimdOptimizerKernel } from './simd-kernel.js';

/** Plain SGD in SIMD128 (`sgd.wat`): `out = param - lr * (grad + wd * param)`, as `sgd.ts`. */
export const sgdSimdKernel: SimdOptimizerKernel = {
  kernel: sgdKernel,
  module: new URL('./sgd.wasm', import.meta.url),
  entries: ['sgd'],
  call: (hyper) => ({ entry: 'sgd', scalars: [hyper.learningRate, hyper.weightDecay] }),
};
