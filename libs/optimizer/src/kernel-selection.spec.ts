import { WasmKernelUnavailableError } from '#libs/wasm-simd';
import {
  InvalidKernelChoiceError,
  SimdKernelBackend,
  jsKernelBackend,
  parseKernelChoice,
  selectKernelBackend,
} from './index.js';

const unavailable = () => {
  throw new WasmKernelUnavailableError('/x/adam.wasm', 'not assembled (npm run build assembles the .wat beside it)');
};

describe('kernel selection', () => {
  it('kernel selection - auto takes SIMD128 where it loads, once per process', () => {
    const { backend, fallbackReason } = selectKernelBackend('auto');
    expect(backend).toBeInstanceOf(SimdKernelBackend);
    expect(backend.name).toBe('wasm-simd');
    expect(fallbackReason).toBeUndefined();
    expect(selectKernelBackend('wasm-simd').backend).toBe(backend);
  });

  it('kernel selection - js is taken when asked for, or with the reason SIMD128 did not load', () => {
    expect(selectKernelBackend('js')).toEqual({
      backend: jsKernelBackend,
      fallbackReason: 'TRIBUTARY_KERNELS=js asks for them',
    });
    const fallback = selectKernelBackend('auto', unavailable);
    expect(fallback.backend).toBe(jsKernelBackend);
    expect(fallback.fallbackReason).toBe(
      'WebAssembly kernels /x/adam.wasm: not assembled (npm run build assembles the .wat beside it)',
    );
    expect(() => selectKernelBackend('wasm-simd', unavailable)).toThrow(WasmKernelUnavailableError);
  });

  it('kernel selection - a choice other than auto, wasm-simd or js is refused with its source named', () => {
    expect(parseKernelChoice(undefined)).toBe('auto');
    expect(parseKernelChoice('')).toBe('auto');
    expect(parseKernelChoice('js')).toBe('js');
    expect(() => parseKernelChoice('gpu')).toThrow(InvalidKernelChoiceError);
    expect(() => parseKernelChoice('gpu')).toThrow('TRIBUTARY_KERNELS = "gpu": expected auto, wasm-simd or js');
  });
});
