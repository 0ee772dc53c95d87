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

/**
 * The same module assembled to import any plain (unshared) memory rather than the kernel heap's
 * shared one (`npm run build` writes it beside the other as `NAME.unshared.wasm`): what runs
 * the kernel on another program's memory, such as the TF.js wasm backend's heap.
 */
export function unsharedModuleOf(config: SimdOptimizerKernel): URL {
  return new URL(config.module.href.replace(/\.wasm$/, '.unshared.wasm'));
}
