import { InvalidKernelChoiceError } from './errors.js';

/**
 * Environment variable that chooses between our WebAssembly SIMD128 kernels and their plain
 * JavaScript versions, for every kernel family that has both (the learner's gradient kernels,
 * the parameter server's optimizer kernels).
 */
export const KERNELS_ENV_VAR = 'TRIBUTARY_KERNELS';

/**
 * What a process may ask for: `auto` (the default) takes SIMD128 where it loads and plain
 * JavaScript otherwise; `wasm-simd` insists on SIMD128 where a family can refuse to start
 * without it (the parameter server); `js` takes plain JavaScript.
 */
export const KERNEL_CHOICES = ['auto', 'wasm-simd', 'js'] as const;

/** One of {@link KERNEL_CHOICES}. */
export type KernelChoice = (typeof KERNEL_CHOICES)[number];

/**
 * Reads a kernel choice, such as the value of `TRIBUTARY_KERNELS`; undefined or empty means
 * `auto`.
 *
 * @throws InvalidKernelChoiceError for anything else than {@link KERNEL_CHOICES}.
 */
export function parseKernelChoice(value: string | undefined): KernelChoice {
  if (value === undefined || value === '') return 'auto';
  if (!(KERNEL_CHOICES as readonly string[]).includes(value)) {
    throw new InvalidKernelChoiceError(KERNELS_ENV_VAR, value);
  }
  return value as KernelChoice;
}

/** True when `env` (the process environment by default) forces the plain JavaScript kernels. */
export function plainKernelsForced(env: NodeJS.ProcessEnv = process.env): boolean {
  return env[KERNELS_ENV_VAR] === 'js';
}
