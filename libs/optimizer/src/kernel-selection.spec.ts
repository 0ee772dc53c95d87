import { WasmKernelUnavailableError } from '#libs/wasm-simd';
import { SimdKernelBackend, jsKernelBackend, selectKernelBackend } from './index.js';

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
});
