import { fileURLToPath } from 'node:url';
import { compileKernelModule, wasmSimdSupported, WasmKernelUnavailableError } from './index.js';

describe('wasm simd', () => {
  it('wasm simd - Node.js 20 validates SIMD128 code', () => {
    expect(wasmSimdSupported()).toBe(true);
  });

  it('wasm simd - a module that was never assembled is refused with its file named', () => {
    const url = new URL('./no-such-kernels.wasm', import.meta.url);
    expect(() => compileKernelModule(url)).toThrow(WasmKernelUnavailableError);
    expect(() => compileKernelModule(url)).toThrow(fileURLToPath(url));
    expect(() => compileKernelModule(url)).toThrow(/not assembled/);
  });
});
