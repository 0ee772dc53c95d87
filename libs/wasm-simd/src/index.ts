/**
 * `#libs/wasm-simd`: loading our hand-written WebAssembly SIMD128 kernels. Their `.wat` text is
 * assembled into `.wasm` by `npm run build`; {@link compileKernelModule} compiles one, and
 * {@link wasmSimdSupported} says whether this runtime can run them at all. Each kernel family
 * keeps a plain JavaScript path for when it cannot, or when {@link KERNELS_ENV_VAR} asks for it.
 */
export { WasmKernelUnavailableError } from './errors.js';
export { KERNELS_ENV_VAR, plainKernelsForced } from './kernel-choice.js';
export { wasmSimdSupported } from './simd-support.js';
export { compileKernelModule } from './wasm-binary.js';
