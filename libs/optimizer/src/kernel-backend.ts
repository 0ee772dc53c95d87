import type { OptimizerHyperparams, OptimizerKernel } from './kernel.js';

/** The ways the parameter server's math can run. */
export type KernelBackendName = 'wasm-simd' | 'js';

/**
 * The sample-weighted sum of one parameter's gradients over the contributions to one synchronous
 * step, kept in float64 on every backend so the average rounds to float32 only once.
 */
export interface GradientSum {
  /** Elements of the parameter. */
  readonly length: number;
  /** Contributions added since the sum was created or last reset. */
  readonly contributions: number;
  /** Adds `gradient * weight` (the weight is the contribution's examples). */
  add(gradient: Float32Array, weight: number): void;
  /** Writes `sum / total`, rounded to float32, into `out`; zeros when nothing was added. */
  averageInto(out: Float32Array, total: number): void;
  /** Empties the sum for the next step; its memory is kept. */
  reset(): void;
  /** Gives its memory back; the sum is unusable afterwards. */
  free(): void;
}

/**
 * Where the optimizer kernels and the gradient sums run, and the arrays they run on fastest.
 * Arrays from anywhere else work too, at the cost of a copy through a small staging area.
 */
export interface KernelBackend {
  readonly name: KernelBackendName;
  /**
   * A new array of `length` float32 values where this backend's kernels run without copying.
   * Its contents are unspecified: fill it before reading it.
   */
  allocate(length: number): Float32Array;
  /**
   * True when `array` is backend memory that `free` gives back for reuse: whoever keeps its
   * values past that point must copy them. Plain arrays are left to the garbage collector.
   */
  manages(array: Float32Array): boolean;
  /**
   * `array`'s values where this backend's kernels run without copying: `array` itself when it
   * is there already (or the backend needs no place of its own), else a copy from `allocate`.
   */
  adopt(array: Float32Array): Float32Array;
  /** Gives back an array from `allocate`; does nothing for an array the backend does not manage. */
  free(array: Float32Array): void;
  /**
   * One step of `kernel` for one parameter: reads `param` and `grad`, updates `state`, and
   * writes the new values into `out`, which may be `param` itself. Every array is
   * `param.length` long.
   */
  update(
    kernel: OptimizerKernel,
    out: Float32Array,
    param: Float32Array,
    grad: Float32Array,
    state: readonly Float32Array[],
    hyper: Readonly<OptimizerHyperparams>,
    step: number,
  ): void;
  /**
   * `out = param + scale * delta` (a parameter delta applied), in float64 and rounded to float32
   * once, the same to the bit on every backend. `out` may be `param`; every array is
   * `param.length` long.
   */
  addScaled(out: Float32Array, param: Float32Array, delta: Float32Array, scale: number): void;
  /** An empty gradient sum for a parameter of `length` elements. */
  gradientSum(length: number): GradientSum;
  /** True when every value of `values` is finite (the check on each gradient a pserver takes). */
  allFinite(values: Float32Array): boolean;
}
