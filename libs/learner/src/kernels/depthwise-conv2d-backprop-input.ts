import {
  backend_util,
  DepthwiseConv2dNativeBackpropInput,
  type KernelConfig,
  type KernelFunc,
  type TensorInfo,
} from '@tensorflow/tfjs';
import { forEachDepthwiseTap } from './depthwise-taps.js';
import { simdKernelsFor } from './kernel-path.js';
import { convGeometry } from './simd-kernels.js';
import { allocateWithViews, heapAddress, withScratch, type WasmHeapBackend } from './wasm-heap.js';

/**
 * Gradient of a depthwise conv2d (NHWC) with respect to its input, on plain typed arrays: each
 * output gradient is scattered back through the filter taps that produced it. `out` receives
 * the input-shaped result. Sums are kept in float64.
 */
export function depthwiseConv2dBackpropInputValues(
  dy: Float32Array,
  filter: Float32Array,
  info: backend_util.Conv2DInfo,
  out: Float32Array,
): void {
  const { batchSize, inHeight, inWidth, inChannels, outChannels } = info;
  const chMul = outChannels / inChannels;
  const acc = new Float64Array(batchSize * inHeight * inWidth * inChannels);
  forEachDepthwiseTap(info, (xBase, dyBase, filterBase) => {
    for (let d1 = 0; d1 < inChannels; d1++) {
      const f = filterBase + d1 * chMul;
      const g = dyBase + d1 * chMul;
      let sum = 0;
      for (let dm = 0; dm < chMul; dm++) sum += dy[g + dm]! * filter[f + dm]!;
      acc[xBase + d1]! += sum;
    }
  });
  out.set(acc);
}

interface DepthwiseBackpropInputArgs {
  inputs: { dy: TensorInfo; filter: TensorInfo };
  backend: WasmHeapBackend;
  attrs: {
    strides: [number, number] | number;
    dilations: [number, number] | number;
    pad: 'valid' | 'same' | number | backend_util.ExplicitPadding;
    dimRoundingMode?: 'floor' | 'round' | 'ceil';
    inputShape: [number, number, number, number];
  };
}

function depthwiseConv2dBackpropInput({ inputs, backend, attrs }: DepthwiseBackpropInputArgs): TensorInfo {
  const { dy, filter } = inputs;
  const { strides, dilations, pad, dimRoundingMode, inputShape } = attrs;
  const info = backend_util.computeConv2DInfo(
    inputShape,
    filter.shape as [number, number, number, number],
    strides,
    dilations,
    pad,
    dimRoundingMode,
    true,
  );
  const simd = simdKernelsFor(backend);
  // The SIMD kernel's loops assume no empty dimension.
  if (simd !== undefined && [...inputShape, ...filter.shape].every((d) => d > 0)) {
    const out = backend.makeOutput(inputShape, 'float32');
    // Room for the list of taps that reach one input position: two addresses per tap.
    withScratch(backend, info.filterHeight * info.filterWidth * 8, (scratch) =>
      simd.depthwiseConv2dBackpropInput(
        heapAddress(backend, dy),
        heapAddress(backend, filter),
        heapAddress(backend, out),
        scratch,
        ...convGeometry(info),
      ),
    );
    return out;
  }
  const { out, outView, inputViews } = allocateWithViews(backend, inputShape, [dy, filter]);
  depthwiseConv2dBackpropInputValues(inputViews[0]!, inputViews[1]!, info, outView);
  return out;
}

/**
 * `DepthwiseConv2dNativeBackpropInput` for the wasm backend, which ships without it: SIMD128 on
 * the SIMD path, {@link depthwiseConv2dBackpropInputValues} otherwise.
 */
export const depthwiseConv2dBackpropInputConfig: KernelConfig = {
  kernelName: DepthwiseConv2dNativeBackpropInput,
  backendName: 'wasm',
  kernelFunc: depthwiseConv2dBackpropInput as unknown as KernelFunc,
};
