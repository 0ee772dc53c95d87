import { util, type KernelConfig, type TensorInfo } from '@tensorflow/tfjs';
import { frontOf } from './front.js';
import { simdKernelsFor } from './kernel-path.js';
import { heapAddress, type WasmHeapBackend } from './wasm-heap.js';

interface AddArgs {
  inputs: { a: TensorInfo; b: TensorInfo };
  backend: WasmHeapBackend;
}

interface SumArgs {
  inputs: { x: TensorInfo };
  backend: WasmHeapBackend;
  attrs: { axis: number | number[]; keepDims: boolean };
}

/** Whether `bias` is a vector of `x`'s last axis, broadcast over the rest of `x` ([C], [1, C], ...). */
function isChannelBias(x: TensorInfo, bias: TensorInfo): boolean {
  const channels = x.shape[x.shape.length - 1];
  return (
    bias.shape.length >= 1 &&
    bias.shape.length <= x.shape.length &&
    bias.shape[bias.shape.length - 1] === channels &&
    bias.shape.slice(0, -1).every((d) => d === 1)
  );
}

/**
 * `x + bias` by our SIMD kernel, or undefined where it does not apply (then the backend's): only
 * for float32 tensors of which one is a bias vector of the other's last axis.
 */
function biasAddSimd({ inputs, backend }: AddArgs): TensorInfo | undefined {
  const { a, b } = inputs;
  if (a.dtype !== 'float32' || b.dtype !== 'float32' || a.shape.length === 0 || b.shape.length === 0) return undefined;
  const [x, bias] = isChannelBias(a, b) ? [a, b] : isChannelBias(b, a) ? [b, a] : [undefined, undefined];
  if (x === undefined || bias === undefined) return undefined;
  const size = util.sizeFromShape(x.shape);
  if (size === 0) return undefined;
  const simd = simdKernelsFor(backend);
  if (simd === undefined) return undefined;
  const channels = x.shape[x.shape.length - 1]!;
  const out = backend.makeOutput(x.shape, 'float32');
  simd.biasAdd(
    heapAddress(backend, x),
    heapAddress(backend, bias),
    heapAddress(backend, out),
    size / channels,
    channels,
  );
  return out;
}

/**
 * The sum over every axis but the last by our SIMD kernel, or undefined where it does not apply
 * (then the backend's): only for float32 tensors of rank 2 or more summed over exactly those axes.
 */
function sumRowsSimd({ inputs, backend, attrs }: SumArgs): TensorInfo | undefined {
  const { x } = inputs;
  const rank = x.shape.length;
  if (x.dtype !== 'float32' || rank < 2) return undefined;
  const axes = [...new Set(util.parseAxisParam(attrs.axis, x.shape))].sort((p, q) => p - q);
  if (axes.length !== rank - 1 || axes.some((axis, i) => axis !== i)) return undefined;
  const size = util.sizeFromShape(x.shape);
  if (size === 0) return undefined;
  const simd = simdKernelsFor(backend);
  if (simd === undefined) return undefined;
  const channels = x.shape[rank - 1]!;
  const out = backend.makeOutput(attrs.keepDims ? [...axes.map(() => 1), channels] : [channels], 'float32');
  simd.sumRows(heapAddress(backend, x), heapAddress(backend, out), size / channels, channels);
  return out;
}

/**
 * `Add` for the wasm backend, standing in front of `own`, the backend's kernel. On the SIMD path
 * a bias added to every row of a float32 tensor (a convolution's or dense layer's bias) comes
 * from our SIMD128 kernel: the backend adds a broadcast operand in a loop that works out each
 * element's place anew, 0.6 ms for a bias of 8 channels over 32 images of 28 x 28. Everything
 * else, and everything on the plain JavaScript path, goes to `own` (whose set-up it keeps).
 */
export function addConfig(own: KernelConfig): KernelConfig {
  return frontOf(own, biasAddSimd);
}

/**
 * `Sum` for the wasm backend, standing in front of `own`, the backend's kernel. On the SIMD path
 * a float32 sum over every axis but the last (a bias's gradient) comes from our SIMD128 kernel,
 * which adds each channel's values in row order: the backend first transposes the tensor to put
 * the summed axes last, and the two took 0.5 ms for the gradient of a bias of 8 channels over 32
 * images of 28 x 28. Everything else, and everything on the plain JavaScript path, goes to `own`
 * (whose set-up it keeps).
 */
export function sumConfig(own: KernelConfig): KernelConfig {
  return frontOf(own, sumRowsSimd);
}
