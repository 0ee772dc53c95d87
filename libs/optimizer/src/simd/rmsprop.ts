import { rmspropKernel, rmspropScalars } from '../rmsprop.js';
import type { SimdOptimizerKernel } from './simd-kernel.js';

/** RMSProp in SIMD128 (`rmsprop.wat`), plain or centered, as `rmsprop.ts`. */
export const rmspropSimdKernel: SimdOptimizerKernel = {
  kernel: rmspropKernel,
  module: new URL('./rmsprop.wasm', import.meta.url),
  entries: ['rmsprop', 'centered'],
  call(hyper) {
    const { decay, oneMinusDecay } = rmspropScalars(hyper);
    return {
      entry: hyper.centered ? 'centered' : 'rmsprop',
      scalars: [hyper.learningRate, decay, oneMinusDecay, hyper.momentum, hyper.epsilon, hyper.weightDecay],
    };
  },
};
