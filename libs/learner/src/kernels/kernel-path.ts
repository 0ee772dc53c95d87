import { KERNELS_ENV_VAR, plainKernelsForced } from '#libs/wasm-simd';
import { bindSimdKernels, type SimdKernels } from './simd-kernels.js';
import type { WasmHeapBackend } from './wasm-heap.js';

/**
 * Which versions of our kernels the wasm backend runs: the hand-written WebAssembly SIMD128
 * ones, or the plain JavaScript ones (where the backend has its own kernel, as for
 * `Conv2DBackpropInput` and `BatchMatMul`, the JavaScript path leaves the work to that one).
 */
export type KernelPath = 'wasm-simd' | 'js';

/** The kernel path in use and, on the plain JavaScript path, why. */
export interface KernelPathInfo {
  path: KernelPath;
  /** Why SIMD is not in use: forced by the caller or by `TRIBUTARY_KERNELS`, or what failed. */
  reason?: string;
}

let current: KernelPathInfo | undefined;

/**
 * Chooses the path of our kernels on `backend` and returns it. `preferred`, else
 * `TRIBUTARY_KERNELS` (`js` forces plain JavaScript), else SIMD; SIMD is taken only when its
 * modules load and can import the backend's memory, and otherwise falls back to plain
 * JavaScript with the reason. Holds for every later kernel call until chosen again.
 */
export function chooseKernelPath(backend: WasmHeapBackend, preferred?: KernelPath): KernelPathInfo {
  if (preferred === 'js') {
    current = { path: 'js', reason: 'asked for by the caller' };
  } else if (preferred === undefined && plainKernelsForced()) {
    current = { path: 'js', reason: `${KERNELS_ENV_VAR}=js` };
  } else {
    try {
      bindSimdKernels(backend);
      current = { path: 'wasm-simd' };
    } catch (error) {
      current = { path: 'js', reason: (error as Error).message };
    }
  }
  return { ...current };
}

/**
 * The SIMD kernels for `backend` when the SIMD path is in use, else undefined (the kernel then
 * runs its plain JavaScript version). Chooses the path on first use if no one has.
 */
export function simdKernelsFor(backend: WasmHeapBackend): SimdKernels | undefined {
  current ??= chooseKernelPath(backend);
  if (current.path === 'js') return undefined;
  try {
    return bindSimdKernels(backend);
  } catch (error) {
    // A backend created after the choice (a new memory) that cannot take our modules.
    current = { path: 'js', reason: (error as Error).message };
    return undefined;
  }
}
