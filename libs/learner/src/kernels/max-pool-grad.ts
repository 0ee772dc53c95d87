import {
  backend_util,
  MaxPoolGrad,
  type KernelConfig,
  type KernelFunc,
  type Tensor4D,
  type TensorInfo,
} from '@tensorflow/tfjs';
import { simdKernelsFor } from './kernel-path.js';
import { allocateWithViews, heapAddress, type WasmHeapBackend } from './wasm-heap.js';

/**
 * Gradient of 2D max pooling (NHWC), on plain typed arrays: each output gradient goes to the
 * first maximum of its window in row-major order (padding never wins), as the cpu backend does.
 * `out` receives the input-shaped result.
 */
export function maxPoolGradValues(
  x: Float32Array,
  dy: Float32Array,
  info: backend_util.Conv2DInfo,
  out: Float32Array,
): void {
  const {
    batchSize,
    inHeight,
    inWidth,
    inChannels,
    outHeight,
    outWidth,
    strideHeight,
    strideWidth,
    dilationHeight,
    dilationWidth,
    effectiveFilterHeight,
    effectiveFilterWidth,
  } = info;
  const top = info.padInfo.top;
  const left = info.padInfo.left;
  const channels = inChannels;
  const acc = new Float64Array(batchSize * inHeight * inWidth * channels);
  const best = new Float64Array(channels);
  const bestAt = new Int32Array(channels);
  for (let b = 0; b < batchSize; b++) {
    for (let yR = 0; yR < outHeight; yR++) {
      const xRStart = yR * strideHeight - top;
      for (let yC = 0; yC < outWidth; yC++) {
        const xCStart = yC * strideWidth - left;
        best.fill(Number.NEGATIVE_INFINITY);
        bestAt.fill(-1);
        for (let wR = 0; wR < effectiveFilterHeight; wR += dilationHeight) {
          const xR = xRStart + wR;
          if (xR < 0 || xR >= inHeight) continue;
          for (let wC = 0; wC < effectiveFilterWidth; wC += dilationWidth) {
            const xC = xCStart + wC;
            if (xC < 0 || xC >= inWidth) continue;
            const xBase = ((b * inHeight + xR) * inWidth + xC) * channels;
            for (let d = 0; d < channels; d++) {
              const v = x[xBase + d]!;
              if (v > best[d]!) {
                best[d] = v;
                bestAt[d] = xBase + d;
              }
            }
          }
        }
        const dyBase = ((b * outHeight + yR) * outWidth + yC) * channels;
        for (let d = 0; d < channels; d++) {
          const at = bestAt[d]!;
          if (at >= 0) acc[at]! += dy[dyBase + d]!;
        }
      }
    }
  }
  out.set(acc);
}

interface MaxPoolGradArgs {
  inputs: { dy: TensorInfo; input: TensorInfo; output: TensorInfo };
  backend: WasmHeapBackend;
  attrs: {
    filterSize: [number, number] | number;
    strides: [number, number] | number;
    pad: 'valid' | 'same' | number | backend_util.ExplicitPadding;
    dimRoundingMode?: 'floor' | 'round' | 'ceil';
  };
}

function maxPoolGrad({ inputs, backend, attrs }: MaxPoolGradArgs): TensorInfo {
  const { dy, input } = inputs;
  const { filterSize, strides, pad, dimRoundingMode } = attrs;
  const info = backend_util.computePool2DInfo(
    input.shape as Tensor4D['shape'],
    filterSize,
    strides,
    1,
    pad,
    dimRoundingMode,
  );
  const simd = simdKernelsFor(backend);
  // The SIMD kernel's loops assume no empty dimension.
  if (simd !== undefined && [...input.shape, info.outHeight, info.outWidth].every((d) => d > 0)) {
    const out = backend.makeOutput(input.shape, 'float32');
    simd.maxPoolGrad(
      heapAddress(backend, input),
      heapAddress(backend, dy),
      heapAddress(backend, out),
      info.batchSize,
      info.inHeight,
      info.inWidth,
      info.inChannels,
      info.outHeight,
      info.outWidth,
      info.strideHeight,
      info.strideWidth,
      info.dilationHeight,
      info.dilationWidth,
      info.effectiveFilterHeight,
      info.effectiveFilterWidth,
      info.padInfo.top,
      info.padInfo.left,
    );
    return out;
  }
  const { out, outView, inputViews } = allocateWithViews(backend, input.shape, [input, dy]);
  maxPoolGradValues(inputViews[0]!, inputViews[1]!, info, outView);
  return out;
}

/**
 * `MaxPoolGrad` for the wasm backend. It replaces the backend's own kernel, which in
 * tfjs-backend-wasm 4.22 routes no gradient to a window whose maximum is negative (as after a
 * tanh or elu activation). SIMD128 on the SIMD path, {@link maxPoolGradValues} otherwise.
 */
export const maxPoolGradConfig: KernelConfig = {
  kernelName: MaxPoolGrad,
  backendName: 'wasm',
  kernelFunc: maxPoolGrad as unknown as KernelFunc,
};
