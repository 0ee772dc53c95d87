import type { backend_util } from '@tensorflow/tfjs';
import { compileKernelModule, WasmKernelUnavailableError } from '#libs/wasm-simd';
import type { WasmHeapBackend } from './wasm-heap.js';

/**
 * One of our SIMD128 kernels: its arguments are byte addresses on the wasm backend's heap and
 * sizes, in the order its `.wat` declares them.
 */
export type SimdKernel = (...args: number[]) => void;

/**
 * A convolution's geometry in the order the convolution kernels' `.wat` declare it after their
 * three addresses: batch, input height, width and channels, output height, width and channels,
 * filter height and width, strides, dilations (unless `withDilation` is false, for kernels
 * without them), and the top and left padding.
 */
export function convGeometry(info: backend_util.Conv2DInfo, withDilation = true): number[] {
  return [
    info.batchSize,
    info.inHeight,
    info.inWidth,
    info.inChannels,
    info.outHeight,
    info.outWidth,
    info.outChannels,
    info.filterHeight,
    info.filterWidth,
    info.strideHeight,
    info.strideWidth,
    ...(withDilation ? [info.dilationHeight, info.dilationWidth] : []),
    info.padInfo.top,
    info.padInfo.left,
  ];
}

/** Each kernel's module (assembled from the `.wat` beside this file) and the function it exports. */
const MODULES = {
  batchMatMul: ['batch-mat-mul.wasm', 'batch_mat_mul'],
  biasAdd: ['bias-add.wasm', 'bias_add'],
  biasRelu: ['bias-add.wasm', 'bias_relu'],
  bytesToF32: ['byte-features.wasm', 'bytes_to_f32'],
  conv2dBackpropFilter: ['conv2d-backprop-filter.wasm', 'conv2d_backprop_filter'],
  conv2dBackpropInput: ['conv2d-backprop-input.wasm', 'conv2d_backprop_input'],
  depthwiseConv2dBackpropFilter: ['depthwise-conv2d-backprop-filter.wasm', 'depthwise_conv2d_backprop_filter'],
  depthwiseConv2dBackpropInput: ['depthwise-conv2d-backprop-input.wasm', 'depthwise_conv2d_backprop_input'],
  maxPoolGrad: ['max-pool-grad.wasm', 'max_pool_grad'],
  reluGrad: ['relu-grad.wasm', 'relu_grad'],
  sumRows: ['sum-rows.wasm', 'sum_rows'],
} as const;

/** The SIMD kernels, by operation. */
export type SimdKernels = Record<keyof typeof MODULES, SimdKernel>;

const BACKEND_MODULE = '@tensorflow/tfjs-backend-wasm';

let compiled: Map<keyof typeof MODULES, WebAssembly.Module> | undefined;
const bound = new WeakMap<WebAssembly.Memory, SimdKernels>();

/**
 * The `WebAssembly.Memory` that holds the backend's tensors: the memory its emscripten module's
 * instance exports (`asm.memory`; `wasmMemory` in other emscripten versions). It must be the one
 * behind the heap views the backend hands out, and unshared, as our modules import it.
 *
 * @throws WasmKernelUnavailableError when no such memory can be reached.
 */
export function backendMemory(backend: WasmHeapBackend): WebAssembly.Memory {
  const candidates = [backend.wasm.asm?.memory, backend.wasm.wasmMemory];
  const memory = candidates.find((m): m is WebAssembly.Memory => tagOf(m) === '[object WebAssembly.Memory]');
  if (memory === undefined) {
    throw new WasmKernelUnavailableError(
      BACKEND_MODULE,
      'its WebAssembly.Memory is exported neither as asm.memory nor as wasmMemory',
    );
  }
  if (tagOf(memory.buffer) !== '[object ArrayBuffer]') {
    throw new WasmKernelUnavailableError(
      BACKEND_MODULE,
      'its memory is shared (the threaded build), which our kernels do not import',
    );
  }
  if (memory.buffer !== backend.wasm.HEAPU8.buffer) {
    throw new WasmKernelUnavailableError(
      BACKEND_MODULE,
      'its exported WebAssembly.Memory is not the one behind its heap',
    );
  }
  return memory;
}

/** The built-in type of a value, which unlike `instanceof` holds across realms (as under jest). */
function tagOf(value: unknown): string {
  return Object.prototype.toString.call(value);
}

function compileAll(): Map<keyof typeof MODULES, WebAssembly.Module> {
  compiled ??= new Map(
    Object.entries(MODULES).map(([op, [file]]) => [
      op as keyof typeof MODULES,
      compileKernelModule(new URL(`./${file}`, import.meta.url)),
    ]),
  );
  return compiled;
}

/**
 * Our SIMD kernels instantiated on the backend's own memory, so that they read their inputs and
 * write their outputs where the tensors lie, with no copies; the memory may grow under them.
 * Modules are compiled once and instantiated once per memory.
 *
 * @throws WasmKernelUnavailableError naming the module or the backend: no SIMD, a module not
 *   assembled or not valid, or a backend memory that cannot be imported.
 */
export function bindSimdKernels(backend: WasmHeapBackend): SimdKernels {
  const memory = backendMemory(backend);
  const known = bound.get(memory);
  if (known !== undefined) return known;
  const kernels = {} as SimdKernels;
  for (const [op, module] of compileAll()) {
    const [file, name] = MODULES[op];
    kernels[op] = instantiateOnMemory(module, memory, file, [name]).get(name)!;
  }
  bound.set(memory, kernels);
  return kernels;
}

/**
 * The functions `names` of `module` (from `file`), instantiated on `memory`, the backend's.
 *
 * @throws WasmKernelUnavailableError naming the file: the memory cannot be imported, or a
 *   function is not exported.
 */
export function instantiateOnMemory(
  module: WebAssembly.Module,
  memory: WebAssembly.Memory,
  file: string,
  names: readonly string[],
): Map<string, SimdKernel> {
  let instance: WebAssembly.Instance;
  try {
    instance = new WebAssembly.Instance(module, { env: { memory } });
  } catch (cause) {
    throw new WasmKernelUnavailableError(file, `cannot import the backend's memory: ${(cause as Error).message}`, {
      cause,
    });
  }
  const kernels = new Map<string, SimdKernel>();
  for (const name of names) {
    const kernel = instance.exports[name];
    if (typeof kernel !== 'function') throw new WasmKernelUnavailableError(file, `exports no function ${name}`);
    kernels.set(name, kernel as SimdKernel);
  }
  return kernels;
}
