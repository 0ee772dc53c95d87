import { KernelHeapExhaustedError, type KernelCaller, type KernelEntry, type KernelHeap } from '#libs/wasm-simd';
import type { GradientSum } from '../kernel-backend.js';

/** The module of the gradient sum (`gradient-sum.wat`). */
export const GRADIENT_SUM_MODULE = new URL('./gradient-sum.wasm', import.meta.url);

/** The exports of `gradient-sum.wat`. */
export interface GradientSumEntries {
  scale: KernelEntry;
  accumulate: KernelEntry;
  average: KernelEntry;
}

/**
 * The gradient sum in SIMD128, over a float64 array in the kernel heap (a plain one when the
 * heap is full). It performs the plain sum's float64 operations in the same order, so the two
 * give the same float32 average to the bit.
 */
export class SimdGradientSum implements GradientSum {
  private readonly sum: Float64Array;
  private added = 0;

  constructor(
    readonly length: number,
    private readonly heap: KernelHeap,
    private readonly caller: KernelCaller,
    private readonly entries: GradientSumEntries,
  ) {
    try {
      this.sum = heap.allocateFloat64(length);
    } catch (err) {
      if (!(err instanceof KernelHeapExhaustedError)) throw err;
      this.sum = new Float64Array(length);
    }
  }

  get contributions(): number {
    return this.added;
  }

  add(gradient: Float32Array, weight: number): void {
    // The first contribution overwrites what an earlier step left, so the sum is never zeroed.
    const first = this.added === 0;
    this.caller.call(
      'gradient sum',
      first ? this.entries.scale : this.entries.accumulate,
      [
        { array: this.sum, role: first ? 'out' : 'inout' },
        { array: gradient, role: 'in' },
      ],
      this.length,
      [weight],
    );
    this.added += 1;
  }

  averageInto(out: Float32Array, total: number): void {
    if (this.added === 0) {
      out.fill(0);
      return;
    }
    this.caller.call(
      'gradient average',
      this.entries.average,
      [
        { array: out, role: 'out' },
        { array: this.sum, role: 'in' },
      ],
      this.length,
      [total],
    );
  }

  reset(): void {
    this.added = 0;
  }

  free(): void {
    this.added = 0;
    if (this.heap.holds(this.sum)) this.heap.free(this.sum);
  }
}
