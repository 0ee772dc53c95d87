/**
 * `#libs/wasm-simd`: running our hand-written WebAssembly SIMD128 kernels. Their `.wat` text is
 * assembled into `.wasm` by `npm run build`; {@link loadKernelModule} compiles and instantiates
 * one over a {@link KernelHeap}, the memory where the arrays the kernels work on live, and a
 * {@link KernelCaller} runs its exports on arrays in the heap or, staged, outside it.
 * {@link wasmSimdSupported} says whether this runtime can run them at all. Each kernel family
 * keeps a plain JavaScript path for when it cannot, or when {@link KERNELS_ENV_VAR} asks for it.
 */
export {
  InvalidKernelChoiceError,
  KernelArgumentError,
  KernelHeapExhaustedError,
  NotHeapAllocationError,
  WasmKernelUnavailableError,
} from './errors.js';
export { KernelCaller, STAGING_CHUNK_ELEMENTS, STAGING_SLOTS } from './kernel-caller.js';
export { KERNEL_CHOICES, KERNELS_ENV_VAR, parseKernelChoice, plainKernelsForced } from './kernel-choice.js';
export { HEAP_ALIGNMENT_BYTES, KernelHeap, MAX_HEAP_PAGES, WASM_PAGE_BYTES } from './kernel-heap.js';
export { wasmSimdSupported } from './simd-support.js';
export { compileKernelModule, loadKernelModule } from './wasm-binary.js';
export type { KernelChoice } from './kernel-choice.js';
export type { KernelArgument, KernelArrayRole, KernelEntry } from './kernel-caller.js';
export type { HeapArray, KernelHeapOptions } from './kernel-heap.js';
export type { KernelModule } from './wasm-binary.js';
