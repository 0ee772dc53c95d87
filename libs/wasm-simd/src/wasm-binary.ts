import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { WasmKernelUnavailableError } from './errors.js';
import type { KernelEntry } from './kernel-caller.js';
import type { KernelHeap } from './kernel-heap.js';
import { wasmSimdSupported } from './simd-support.js';

/**
 * Compiles a kernel module that `npm run build` assembled from its `.wat` text (the `.wasm`
 * lies beside the text in the sources and beside the compiled JavaScript in `dist/`). Pass
 * `new URL('./name.wasm', import.meta.url)` from the loader beside it. Kernel modules use
 * SIMD128, so a runtime without it is refused before the file is read.
 *
 * @throws WasmKernelUnavailableError naming the file: no SIMD, not assembled, or not valid.
 */
export function compileKernelModule(url: URL): WebAssembly.Module {
  const file = fileURLToPath(url);
  if (!wasmSimdSupported()) throw new WasmKernelUnavailableError(file, 'this runtime has no WebAssembly SIMD128');
  let bytes: Buffer;
  try {
    bytes = readFileSync(file);
  } catch (cause) {
    throw new WasmKernelUnavailableError(file, 'not assembled (npm run build assembles the .wat beside it)', { cause });
  }
  try {
    return new WebAssembly.Module(bytes);
  } catch (cause) {
    throw new WasmKernelUnavailableError(file, `not a valid module: ${(cause as Error).message}`, { cause });
  }
}

/** The exports of one instantiated kernel module, looked up by name. */
export interface KernelModule {
  /** The `.wasm` file it came from. */
  readonly file: string;
  /**
   * The exported function `name`.
   *
   * @throws WasmKernelUnavailableError naming the file when it exports no such function.
   */
  entry(name: string): KernelEntry;
}

/**
 * Compiles the kernel module at `url` (see `compileKernelModule`) and instantiates it over
 * `heap`, whose memory it imports as `env.memory`.
 *
 * @throws WasmKernelUnavailableError naming the file: no SIMD, not assembled, not valid, or its
 *   imports do not fit.
 */
export function loadKernelModule(url: URL, heap: KernelHeap): KernelModule {
  const file = fileURLToPath(url);
  const module = compileKernelModule(url);
  let exports: WebAssembly.Exports;
  try {
    exports = new WebAssembly.Instance(module, { env: { memory: heap.memory } }).exports;
  } catch (cause) {
    throw new WasmKernelUnavailableError(file, `cannot be instantiated: ${(cause as Error).message}`, { cause });
  }
  return {
    file,
    entry(name) {
      const fn = exports[name];
      if (typeof fn !== 'function') throw new WasmKernelUnavailableError(file, `exports no function "${name}"`);
      return fn as KernelEntry;
    },
  };
}
