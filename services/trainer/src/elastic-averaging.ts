import type { PlainTensor } from '#libs/learner';
import type { ParamTensor } from '#libs/pserver-client';

/**
 * One elastic averaging (EASGD) exchange between a worker and the center, the worker's half:
 * the elastic difference `e = alpha * (x - center)` of each parameter, and the worker moved
 * toward the center by it (`x - e`). The parameter servers move the center by the same `e`
 * (`x_center + e`), so both end up `alpha` of the way toward each other. `worker` and `center`
 * hold the same parameters in the same order; computed in float64, rounded once.
 */
export function elasticExchange(
  worker: readonly PlainTensor[],
  center: readonly ParamTensor[],
  alpha: number,
): { difference: PlainTensor[]; moved: PlainTensor[] } {
  const difference: PlainTensor[] = [];
  const moved: PlainTensor[] = [];
  worker.forEach((w, i) => {
    const c = center[i];
    if (c === undefined || c.name !== w.name || c.data.length !== w.data.length) {
      throw new Error(`elastic averaging: the center has no parameter matching ${w.name} at position ${i}`);
    }
    const e = new Float32Array(w.data.length);
    const x = new Float32Array(w.data.length);
    for (let j = 0; j < e.length; j++) {
      const d = alpha * (w.data[j]! - c.data[j]!);
      e[j] = d;
      x[j] = w.data[j]! - d;
    }
    difference.push({ name: w.name, dtype: 'float32', shape: [...w.shape], data: e });
    moved.push({ name: w.name, dtype: 'float32', shape: [...w.shape], data: x });
  });
  return { difference, moved };
}
