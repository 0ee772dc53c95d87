/**
 * `#libs/wasm-simd`: loading our hand-written WebAssembly SIMD128 kernels. Their `.wat` text is
 * assembled into `.wasm` by `npm run build`; {@link compileKernelModule} compiles one, and
 * {@link wasmSimdSupported} says whether this runtime can run them at all. Each kernel family
 * keeps a plain JavaScript path for when it cannot.
 */
export { WasmKernelUnavailableError } from './errors.js';
export { wasmSimdSupported } from './simd-support.js';
export { compileKernelModule } from './wasm-binary.js';
