import type { OptimizerHyperparams, OptimizerKernel } from '../kernel.js';

/**
 * An optimizer kernel in WebAssembly SIMD128: one `.wat` module beside its config. Each export
 * takes the byte offsets of `out`, `param`, `grad` and the state slots (in the plain kernel's
 * order), the element count, then the scalars `call` gives; `out` may be `param`.
 */
export interface SimdOptimizerKernel {
  /** The plain kernel whose update this one computes, in float32 operations. */
  readonly kernel: OptimizerKernel;
  /** The assembled module (`npm run build` assembles the `.wat` beside it). */
  readonly module: URL;
  /** The functions the module exports, checked when it is loaded. */
  readonly entries: readonly string[];
  /** The export for these hyperparameters and its scalar arguments for step `step`. */
  call(hyper: Readonly<OptimizerHyperparams>, step: number): { entry: string; scalars: number[] };
}
