import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { WasmKernelUnavailableError } from './errors.js';
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
