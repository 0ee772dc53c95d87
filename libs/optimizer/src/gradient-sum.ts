import type { GradientSum } from './kernel-backend.js';

/**
 * The gradient sum in plain JavaScript, over a `Float64Array`: the reference the WebAssembly
 * sum is held to.
 */
export class Float64GradientSum implements GradientSum {
  private readonly sum: Float64Array;
  private added = 0;

  constructor(readonly length: number) {
    this.sum = new Float64Array(length);
  }

  get contributions(): number {
    return this.added;
  }

  add(gradient: Float32Array, weight: number): void {
    const sum = this.sum;
    // The first contribution overwrites what an earlier step left, as adding it to zeros would.
    if (this.added === 0) for (let i = 0; i < sum.length; i++) sum[i] = 0 + gradient[i] * weight;
    else for (let i = 0; i < sum.length; i++) sum[i] += gradient[i] * weight;
    this.added += 1;
  }

  averageInto(out: Float32Array, total: number): void {
    if (this.added === 0) {
      out.fill(0);
      return;
    }
    const sum = this.sum;
    for (let i = 0; i < sum.length; i++) out[i] = sum[i] / total;
  }

  reset(): void {
    this.added = 0;
  }

  free(): void {
    this.added = 0;
  }
}
