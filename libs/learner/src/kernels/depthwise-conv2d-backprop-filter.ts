import {
  backend_util,
  DepthwiseConv2dNativeBackpropFilter,
  type KernelConfig,
  type KernelFunc,
  type Tensor4D,
  type TensorInfo,
} from '@tensorflow/tfjs';
import { forEachDepthwiseTap } from './depthwise-taps.js';
import { simdKernelsFor } from './kernel-path.js';
import { convGeometry } from './simd-kernels.js';
import { allocateWithViews, heapAddress, type WasmHeapBackend } from './wasm-heap.js';

/**
 * Gradient of a depthwise conv2d (NHWC) with respect to its filter, on plain typed arrays.
 * `out` receives `[filterHeight, filterWidth, inChannels, channelMultiplier]`; output channel
 * `d1 * channelMultiplier + dm` reads input channel `d1`. Sums are kept in float64.
 */
export function depthwiseConv2dBackpropFilterValues(
  x: Float32Array,
  dy: Float32Array,
  info: backend_util.Conv2DInfo,
  out: Float32Array,
): void {
  const { inChannels, outChannels, filterHeight, filterWidth } = info;
  const chMul = outChannels / inChannels;
  const acc = new Float64Array(filterHeight * filterWidth * inChannels * chMul);
  forEachDepthwiseTap(info, (xBase, dyBase, filterBase) => {
    for (let d1 = 0; d1 < inChannels; d1++) {
      const xv = x[xBase + d1]!;
      const a = filterBase + d1 * chMul;
      const g = dyBase + d1 * chMul;
      for (let dm = 0; dm < chMul; dm++) acc[a + dm]! += xv * dy[g + dm]!;
    }
  });
  out.set(acc);
}

interface DepthwiseBackpropFilterArgs {
  inputs: { x: TensorInfo; dy: TensorInfo };
  backend: WasmHeapBackend;
  attrs: {
    strides: [number, number] | number;
    dilations: [number, number] | number;
    pad: 'valid' | 'same' | number | backend_util.ExplicitPadding;
    dimRoundingMode?: 'floor' | 'round' | 'ceil';
    filterShape: [number, number, number, number];
  };
}

function depthwiseConv2dBackpropFilter({ inputs, backend, attrs }: DepthwiseBackpropFilterArgs): TensorInfo {
  const { x, dy } = inputs;
  const { strides, dilations, pad, dimRoundingMode, filterShape } = attrs;
  const info = backend_util.computeConv2DInfo(
    x.shape as Tensor4D['shape'],
    filterShape,
    strides,
    dilations,
    pad,
    dimRoundingMode,
    true,
  );
  const simd = simdKernelsFor(backend);
  // The SIMD kernel's loops assume no empty dimension.
  if (simd !== undefined && [...x.shape, ...filterShape].every((d) => d > 0)) {
    const out = backend.makeOutput(filterShape, 'float32');
    simd.depthwiseConv2dBackpropFilter(
      heapAddress(backend, x),
      heapAddress(backend, dy),
      heapAddress(backend, out),
      ...convGeometry(info),
    );
    return out;
  }
  const { out, outView, inputViews } = allocateWithViews(backend, filterShape, [x, dy]);
  depthwiseConv2dBackpropFilterValues(inputViews[0]!, inputViews[1]!, info, outView);
  return out;
}

/**
 * `DepthwiseConv2dNativeBackpropFilter` for the wasm backend, which ships without it: SIMD128 on
 * the SIMD path, {@link depthwiseConv2dBackpropFilterValues} otherwise.
 */
export const depthwiseConv2dBackpropFilterConfig: KernelConfig = {
  kernelName: DepthwiseConv2dNativeBackpropFilter,
  backendName: 'wasm',
  kernelFunc: depthwiseConv2dBackpropFilter as unknown as KernelFunc,
};
