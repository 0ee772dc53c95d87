/**
 * `out = param + scale * delta`, in float64 and rounded to float32 once: the plain loop of a
 * `local` round's step on the pserver, and the reference for the SIMD128 one
 * (`simd/add-scaled.wat`), which performs the same operations and agrees to the bit. `out` may
 * be `param`; every array is `param.length` long.
 */
export function addScaled(out: Float32Array, param: Float32Array, delta: Float32Array, scale: number): void {
  for (let i = 0; i < out.length; i++) out[i] = param[i]! + scale * delta[i]!;
}
