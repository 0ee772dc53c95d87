import { fileURLToPath } from 'node:url';
import {
  compileKernelModule,
  InvalidKernelChoiceError,
  parseKernelChoice,
  plainKernelsForced,
  wasmSimdSupported,
  WasmKernelUnavailableError,
} from './index.js';

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

  it('wasm simd - a kernel choice other than auto, wasm-simd or js is refused with its source named', () => {
    expect(parseKernelChoice(undefined)).toBe('auto');
    expect(parseKernelChoice('')).toBe('auto');
    expect(parseKernelChoice('js')).toBe('js');
    expect(() => parseKernelChoice('gpu')).toThrow(InvalidKernelChoiceError);
    expect(() => parseKernelChoice('gpu')).toThrow('TRIBUTARY_KERNELS = "gpu": expected auto, wasm-simd or js');
    expect(plainKernelsForced({ TRIBUTARY_KERNELS: 'js' })).toBe(true);
    expect(plainKernelsForced({ TRIBUTARY_KERNELS: 'auto' })).toBe(false);
  });
});
