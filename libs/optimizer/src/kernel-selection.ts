import { KERNELS_ENV_VAR, parseKernelChoice, type KernelChoice } from '#libs/wasm-simd';
import { jsKernelBackend } from './js-backend.js';
import type { KernelBackend } from './kernel-backend.js';
import { loadSimdKernelBackend } from './simd/simd-backend.js';

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

let chosen: KernelBackend | undefined;

/**
 * The kernels `TRIBUTARY_KERNELS` asks for, read once: what a parameter shard uses when its
 * owner names none (tests, tools).
 */
export function defaultKernelBackend(): KernelBackend {
  chosen ??= selectKernelBackend(parseKernelChoice(process.env[KERNELS_ENV_VAR])).backend;
  return chosen;
}
