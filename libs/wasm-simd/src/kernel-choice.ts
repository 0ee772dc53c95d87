/**
 * Environment variable that chooses between our WebAssembly SIMD kernels and their plain
 * JavaScript versions, for every kernel family that has both (the learner's gradient kernels,
 * the parameter server's optimizer kernels): `js` forces plain JavaScript; anything else, or
 * nothing, means SIMD wherever the runtime can run it.
 */
export const KERNELS_ENV_VAR = 'TRIBUTARY_KERNELS';

/** True when `env` (the process environment by default) forces the plain JavaScript kernels. */
export function plainKernelsForced(env: NodeJS.ProcessEnv = process.env): boolean {
  return env[KERNELS_ENV_VAR] === 'js';
}
