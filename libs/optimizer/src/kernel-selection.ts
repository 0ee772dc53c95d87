import { InvalidKernelChoiceError } from './errors.js';
import { jsKernelBackend } from './js-backend.js';
import type { KernelBackend } from './kernel-backend.js';
import { loadSimdKernelBackend } from './simd/simd-backend.js';

/** Environment variable that picks the kernels: `auto` (the default), `wasm-simd` or `js`. */
export const KERNELS_ENV_VAR = 'TRIBUTARY_KERNELS';

/**
 * What a process may ask for: `auto` takes WebAssembly SIMD128 when it loads and plain
 * JavaScript otherwise; `wasm-simd` insists on SIMD128; `js` takes plain JavaScript.
 */
export const KERNEL_CHOICES = ['auto', 'wasm-simd', 'js'] as const;

/** One of {@link KERNEL_CHOICES}. */
export type KernelChoice = (typeof KERNEL_CHOICES)[number];

/** The kernels a process runs, and why plain JavaScript runs when it does. */
export interface KernelSelection {
  backend: KernelBackend;
  /** Why the plain JavaScript kernels run; absent when SIMD128 runs. */
  fallbackReason?: string;
}

let shared: { backend: KernelBackend } | { error: Error } | undefined;

/**
 * The SIMD128 kernels, loaded once per process over one kernel heap that every caller shares;
 * a failure to load them is remembered too.
 */
function loadSharedSimdBackend(): KernelBackend {
  if (!shared) {
    try {
      shared = { backend: loadSimdKernelBackend() };
    } catch (err) {
      shared = { error: err as Error };
    }
  }
  if ('error' in shared) throw shared.error;
  return shared.backend;
}

/**
 * The kernels for `choice`. `load` loads the SIMD128 kernels; by default they are loaded once
 * per process, over one kernel heap shared by every caller.
 *
 * @throws WasmKernelUnavailableError when `choice` is `wasm-simd` and they cannot be loaded.
 */
export function selectKernelBackend(
  choice: KernelChoice = 'auto',
  load: () => KernelBackend = loadSharedSimdBackend,
): KernelSelection {
  if (choice === 'js') return { backend: jsKernelBackend, fallbackReason: `${KERNELS_ENV_VAR}=js asks for them` };
  try {
    return { backend: load() };
  } catch (err) {
    if (choice === 'wasm-simd') throw err;
    return { backend: jsKernelBackend, fallbackReason: (err as Error).message };
  }
}

/**
 * Reads a kernel choice, such as the value of `TRIBUTARY_KERNELS`; undefined or empty means
 * `auto`.
 *
 * @throws InvalidKernelChoiceError for anything else than {@link KERNEL_CHOICES}.
 */
export function parseKernelChoice(value: string | undefined): KernelChoice {
  if (value === undefined || value === '') return 'auto';
  if (!(KERNEL_CHOICES as readonly string[]).includes(value))
    throw new InvalidKernelChoiceError(KERNELS_ENV_VAR, value);
  return value as KernelChoice;
}

let chosen: KernelBackend | undefined;

/**
 * The kernels `TRIBUTARY_KERNELS` asks for, read once: what a parameter shard uses when its
 * owner names none (tests, tools).
 */
export function defaultKernelBackend(): KernelBackend {
  chosen ??= selectKernelBackend(parseKernelChoice(process.env[KERNELS_ENV_VAR])).backend;
  return chosen;
}
