import type { DataType, TensorInfo } from '@tensorflow/tfjs';

/** The float32 or int32 view that the wasm backend hands out for a tensor's memory. */
export type HeapArray = Float32Array | Int32Array | Uint8Array;

/**
 * The part of the wasm backend (`BackendWasm`) that plain-TypeScript kernels use: tensors live
 * on the wasm heap, `typedArrayFromHeap` gives a view of one, `makeOutput` allocates one.
 */
export interface WasmHeapBackend {
  makeOutput(shape: number[], dtype: DataType): TensorInfo;
  typedArrayFromHeap(info: TensorInfo): HeapArray;
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
  if (!(view instanceof Float32Array)) {
    throw new TypeError(`kernel input of shape [${info.shape.join(', ')}] has dtype ${info.dtype}, expected float32`);
  }
  return view;
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
