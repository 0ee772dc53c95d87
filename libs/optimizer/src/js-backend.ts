import { addScaled } from './add-scaled.js';
import { allFinite } from './finite-check.js';
import { Float64GradientSum } from './gradient-sum.js';
import type { KernelBackend } from './kernel-backend.js';

/**
 * The optimizer kernels as plain JavaScript loops over ordinary arrays: the reference, and the
 * path taken where WebAssembly SIMD is unavailable or `TRIBUTARY_KERNELS=js` asks for it.
 */
export const jsKernelBackend: KernelBackend = {
  name: 'js',
  allocate: (length) => new Float32Array(length),
  manages: () => false,
  adopt: (array) => array,
  free: () => undefined,
  update(kernel, out, param, grad, state, hyper, step) {
    if (out !== param) out.set(param);
    kernel.apply(out, grad, state, hyper, step);
  },
  addScaled,
  gradientSum: (length) => new Float64GradientSum(length),
  allFinite,
};
