/**
 * True when every value is finite: the plain check, and the reference for the SIMD128 one
 * (`simd/finite-check.wat`). `v - v` is 0 for every finite `v` and NaN for NaN and the
 * infinities, and a NaN stays in a sum: four independent sums, without a branch per value.
 */
export function allFinite(values: Float32Array): boolean {
  const n = values.length;
  const end = n - (n % 4);
  let s0 = 0;
  let s1 = 0;
  let s2 = 0;
  let s3 = 0;
  let i = 0;
  for (; i < end; i += 4) {
    s0 += values[i]! - values[i]!;
    s1 += values[i + 1]! - values[i + 1]!;
    s2 += values[i + 2]! - values[i + 2]!;
    s3 += values[i + 3]! - values[i + 3]!;
  }
  for (; i < n; i++) s0 += values[i]! - values[i]!;
  return s0 + s1 + s2 + s3 === 0;
}
