import { adamKernel, adamScalars } from '../adam.js';
import type { OptimizerHyperparams } from '../kernel.js';
import type { SimdOptimizerKernel } from './simd-kernel.js';

/**
 * The scalars of `adam.wat` for step `step`, with `l2` the L2 weight decay and `decay` the
 * decoupled one (see `adamUpdate` in `adam.ts`).
 */
export function adamWatScalars(
  hyper: Readonly<OptimizerHyperparams>,
  step: number,
  l2: number,
  decay: number,
): number[] {
  const s = adamScalars(hyper, step);
  return [s.stepSize, s.beta1, s.beta2, s.oneMinusBeta1, s.oneMinusBeta2, s.epsilonHat, l2, decay];
}

/**
 * Adam in SIMD128 (`adam.wat`), as `adam.ts`, with the same float32 bias corrections that
 * follow TensorFlow.js.
 */
export const adamSimdKernel: SimdOptimizerKernel = {
  kernel: adamKernel,
  module: new URL('./adam.wasm', import.meta.url),
  entries: ['adam'],
  call: (hyper, step) => ({ entry: 'adam', scalars: adamWatScalars(hyper, step, hyper.weightDecay, 0) }),
};
