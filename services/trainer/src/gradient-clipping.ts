import type { PlainTensor } from '#libs/learner';

/** How a trainer clips its gradient before pushing it: `optimizer.clipNorm` and `optimizer.clipValue`. */
export interface GradientClipping {
  /** Longest global L2 norm of the whole gradient; absent: no norm clipping. */
  clipNorm?: number;
  /** Largest magnitude of any element; absent: no element clipping. */
  clipValue?: number;
}

/** The L2 norm of every float32 tensor of `update` taken together, summed in float64. */
export function globalNorm(update: readonly PlainTensor[]): number {
  let sum = 0;
  for (const { dtype, data } of update) {
    if (dtype !== 'float32') continue;
    for (let i = 0; i < data.length; i++) sum += data[i]! * data[i]!;
  }
  return Math.sqrt(sum);
}

/**
 * `update` clipped before it is pushed. The trainer holds the gradient of every parameter, of
 * all shards, so the norm is the global one: the whole gradient is scaled by
 * `clipNorm / max(norm, clipNorm)` (as `tf.clip_by_global_norm`), then every element is clipped
 * to [-clipValue, clipValue]. Tensors nothing changes are returned as they are and the others
 * as copies, so the learner's arrays are never written. Only float32 tensors are clipped.
 */
export function clipGradients(update: PlainTensor[], clipping: GradientClipping = {}): PlainTensor[] {
  const { clipNorm, clipValue } = clipping;
  if (clipNorm === undefined && clipValue === undefined) return update;
  const norm = clipNorm === undefined ? 0 : globalNorm(update);
  const scale = clipNorm !== undefined && norm > clipNorm ? clipNorm / norm : 1;
  const limit = clipValue ?? Infinity;
  return update.map((tensor) => {
    const { dtype, data } = tensor;
    if (dtype !== 'float32') return tensor;
    if (scale === 1 && data.every((x) => Math.abs(x) <= limit)) return tensor;
    const clipped = new Float32Array(data.length);
    for (let i = 0; i < data.length; i++) clipped[i] = Math.min(limit, Math.max(-limit, data[i]! * scale));
    return { ...tensor, data: clipped };
  });
}
