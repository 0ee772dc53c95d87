import type { DataType, TensorInfo } from '@tensorflow/tfjs';
import { WasmHeapExhaustedError } from '../errors.js';

/** The float32 or int32 view that the wasm backend hands out for a tensor's memory. */
export type HeapArray = Float32Array | Int32Array | Uint8Array;

/**
 * The parts of the emscripten module behind the wasm backend (`BackendWasm.wasm`) that our
 * kernels use: its heap, its allocator, and the exports of its WebAssembly instance (where the
 * `WebAssembly.Memory` our SIMD kernels import is found).
 */
export interface WasmBackendHeap {
  HEAPU8: Uint8Array;
  _malloc(bytes: number): number;
  _free(address: number): void;
  asm?: { memory?: unknown };
  wasmMemory?: unknown;
}

/**
 * The part of the wasm backend (`BackendWasm`) that our kernels use: tensors live on the wasm
 * heap, `typedArrayFromHeap` gives a view of one, `getMemoryOffset` its byte address,
 * `makeOutput` allocates one.
 */
export interface WasmHeapBackend {
  makeOutput(shape: number[], dtype: DataType): TensorInfo;
  typedArrayFromHeap(info: TensorInfo): HeapArray;
  getMemoryOffset(dataId: TensorInfo['dataId']): number;
  wasm: WasmBackendHeap;
}

/**
 * The byte address on the wasm heap of a float32 tensor, for a SIMD kernel. Addresses, unlike
 * views, stay valid when the heap grows.
 */
export function heapAddress(backend: WasmHeapBackend, info: TensorInfo): number {
  if (info.dtype !== 'float32') throw wrongDtype(info);
  return backend.getMemoryOffset(info.dataId);
}

/**
 * Runs `use` with `bytes` of scratch memory allocated on the wasm heap (at its byte address),
 * and frees it afterwards.
 *
 * @throws WasmHeapExhaustedError when the heap cannot grow to hold it.
 */
export function withScratch<T>(backend: WasmHeapBackend, bytes: number, use: (address: number) => T): T {
  const address = backend.wasm._malloc(bytes);
  if (address === 0) throw new WasmHeapExhaustedError(bytes, 'kernel scratch memory');
  try {
    return use(address);
  } finally {
    backend.wasm._free(address);
  }
}

/**
 * Allocates a float32 output on the wasm heap and returns it with views of the inputs and the
 * output. The views are taken after the allocation, which may grow (and so detach) the heap.
 */
export function allocateWithViews(
  backend: WasmHeapBackend,
  outShape: number[],
  inputs: TensorInfo[],
): { out: TensorInfo; outView: Float32Array; inputViews: Float32Array[] } {
  const out = backend.makeOutput(outShape, 'float32');
  const inputViews = inputs.map((t) => asFloat32(backend.typedArrayFromHeap(t), t));
  const outView = asFloat32(backend.typedArrayFromHeap(out), out);
  return { out, outView, inputViews };
}

function asFloat32(view: HeapArray, info: TensorInfo): Float32Array {
  if (!(view instanceof Float32Array)) throw wrongDtype(info);
  return view;
}

function wrongDtype(info: TensorInfo): TypeError {
  return new TypeError(`kernel input of shape [${info.shape.join(', ')}] has dtype ${info.dtype}, expected float32`);
}

/** Element strides of a rank-4 tensor along batch, row, column and channel for a data format. */
export interface Rank4Strides {
  batch: number;
  row: number;
  col: number;
  channel: number;
}

/**
 * Strides of a rank-4 tensor of shape `shape` (NHWC when `channelsLast`, else NCHW), named by
 * axis meaning so one loop serves both layouts.
 */
export function rank4Strides(shape: readonly number[], channelsLast: boolean): Rank4Strides {
  const [, d1, d2, d3] = shape as [number, number, number, number];
  if (channelsLast) {
    return { batch: d1 * d2 * d3, row: d2 * d3, col: d3, channel: 1 };
  }
  return { batch: d1 * d2 * d3, row: d3, col: 1, channel: d2 * d3 };
}
