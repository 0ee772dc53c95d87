import { adamKernel, adamScalars } from '../adam.js';
import type { SimdOptimizerKernel } from './simd-kernel.js';

/**
 * Adam in SIMD128 (`adam.wat`), as `adam.ts`, with the same float32 bias corrections that
 * follow TensorFlow.js.
 */
export const adamSimdKernel: SimdOptimizerKernel = {
  kernel: adamKernel,
  module: new URL('./adam.wasm', import.meta.url),
  entries: ['adam'],
  call(hyper, step) {
    const s = adamScalars(hyper, step);
    return {
      entry: 'adam',
      scalars: [
        hyper.learningRate,
        s.beta1,
        s.beta2,
        s.oneMinusBeta1,
        s.oneMinusBeta2,
        s.correction1,
        s.correction2,
        hyper.epsilon,
      ],
    };
  },
};
