import {
  backend_util,
  Conv2DBackpropFilter,
  type KernelConfig,
  type KernelFunc,
  type Tensor4D,
  type TensorInfo,
} from '@tensorflow/tfjs';
import { simdKernelsFor } from './kernel-path.js';
import { convGeometry } from './simd-kernels.js';
import { allocateWithViews, heapAddress, rank4Strides, type WasmHeapBackend } from './wasm-heap.js';

/**
 * Gradient of conv2d with respect to its filter, on plain typed arrays: for every filter tap
 * (wR, wC, d1, d2), the sum over the batch and the output positions of x times dy. `out`
 * receives the filter-shaped result `[filterHeight, filterWidth, inChannels, outChannels]`.
 * Sums are kept in float64 and rounded once.
 */
export function conv2dBackpropFilterValues(
  x: Float32Array,
  dy: Float32Array,
  info: backend_util.Conv2DInfo,
  out: Float32Array,
): void {
  const channelsLast = info.dataFormat === 'channelsLast';
  const xs = rank4Strides(info.inShape, channelsLast);
  const ys = rank4Strides(info.outShape, channelsLast);
  const {
    batchSize,
    inHeight,
    inWidth,
    inChannels,
    outHeight,
    outWidth,
    outChannels,
    filterHeight,
    filterWidth,
    strideHeight,
    strideWidth,
    dilationHeight,
    dilationWidth,
  } = info;
  const top = info.padInfo.top;
  const left = info.padInfo.left;
  const acc = new Float64Array(filterHeight * filterWidth * inChannels * outChannels);
  for (let b = 0; b < batchSize; b++) {
    for (let yR = 0; yR < outHeight; yR++) {
      for (let wR = 0; wR < filterHeight; wR++) {
        const xR = yR * strideHeight + wR * dilationHeight - top;
        if (xR < 0 || xR >= inHeight) continue;
        for (let yC = 0; yC < outWidth; yC++) {
          const dyBase = b * ys.batch + yR * ys.row + yC * ys.col;
          for (let wC = 0; wC < filterWidth; wC++) {
            const xC = yC * strideWidth + wC * dilationWidth - left;
            if (xC < 0 || xC >= inWidth) continue;
            const xBase = b * xs.batch + xR * xs.row + xC * xs.col;
            const accBase = (wR * filterWidth + wC) * inChannels * outChannels;
            for (let d1 = 0; d1 < inChannels; d1++) {
              const xv = x[xBase + d1 * xs.channel]!;
              if (xv === 0) continue;
              const a = accBase + d1 * outChannels;
              for (let d2 = 0; d2 < outChannels; d2++) {
                acc[a + d2]! += xv * dy[dyBase + d2 * ys.channel]!;
              }
            }
          }
        }
      }
    }
  }
  out.set(acc);
}

/** What TF.js hands a Conv2DBackpropFilter kernel, on a backend of type `B`. */
export interface Conv2DBackpropFilterArgs<B = WasmHeapBackend> {
  inputs: { x: TensorInfo; dy: TensorInfo };
  backend: B;
  attrs: {
    strides: [number, number] | number;
    pad: 'valid' | 'same' | number | backend_util.ExplicitPadding;
    dataFormat: 'NHWC' | 'NCHW';
    dimRoundingMode?: 'floor' | 'round' | 'ceil';
    filterShape: [number, number, number, number];
  };
}

function conv2dBackpropFilter({ inputs, backend, attrs }: Conv2DBackpropFilterArgs): TensorInfo {
  const { x, dy } = inputs;
  const { strides, pad, dataFormat, dimRoundingMode, filterShape } = attrs;
  const info = backend_util.computeConv2DInfo(
    x.shape as Tensor4D['shape'],
    filterShape,
    strides,
    1,
    pad,
    dimRoundingMode,
    false,
    backend_util.convertConv2DDataFormat(dataFormat),
  );
  const simd = simdKernelsFor(backend);
  // The SIMD kernel walks NHWC only, and its loops assume no empty dimension.
  if (simd !== undefined && info.dataFormat === 'channelsLast' && [...x.shape, ...filterShape].every((d) => d > 0)) {
    const out = backend.makeOutput(info.filterShape, 'float32');
    simd.conv2dBackpropFilter(
      heapAddress(backend, x),
      heapAddress(backend, dy),
      heapAddress(backend, out),
      ...convGeometry(info),
    );
    return out;
  }
  const { out, outView, inputViews } = allocateWithViews(backend, info.filterShape, [x, dy]);
  conv2dBackpropFilterValues(inputViews[0]!, inputViews[1]!, info, outView);
  return out;
}

/**
 * `Conv2DBackpropFilter` for the wasm backend, which ships without it: SIMD128 for NHWC on the
 * SIMD path, {@link conv2dBackpropFilterValues} otherwise.
 */
export const conv2dBackpropFilterConfig: KernelConfig = {
  kernelName: Conv2DBackpropFilter,
  backendName: 'wasm',
  kernelFunc: conv2dBackpropFilter as unknown as KernelFunc,
};
