import {
  backend_util,
  Conv2DBackpropInput,
  type KernelConfig,
  type KernelFunc,
  type TensorInfo,
} from '@tensorflow/tfjs';
import { simdKernelsFor } from './kernel-path.js';
import { convGeometry } from './simd-kernels.js';
import { heapAddress, withScratch, type WasmHeapBackend } from './wasm-heap.js';

interface Conv2DBackpropInputArgs {
  inputs: { dy: TensorInfo; filter: TensorInfo };
  backend: WasmHeapBackend;
  attrs: {
    strides: [number, number] | number;
    pad: 'valid' | 'same' | number | backend_util.ExplicitPadding;
    dataFormat: 'NHWC' | 'NCHW';
    dimRoundingMode?: 'floor' | 'round' | 'ceil';
    inputShape: [number, number, number, number];
  };
}

/** The input gradient by our SIMD kernel, or undefined where it does not apply (then the backend's). */
function conv2dBackpropInputSimd({ inputs, backend, attrs }: Conv2DBackpropInputArgs): TensorInfo | undefined {
  const simd = simdKernelsFor(backend);
  if (simd === undefined || attrs.dataFormat === 'NCHW') return undefined;
  const { dy, filter } = inputs;
  const { strides, pad, dimRoundingMode, inputShape } = attrs;
  // The kernel's loops assume no empty dimension.
  if (![...inputShape, ...filter.shape].every((d) => d > 0)) return undefined;
  const info = backend_util.computeConv2DInfo(
    inputShape,
    filter.shape as [number, number, number, number],
    strides,
    1,
    pad,
    dimRoundingMode,
  );
  const out = backend.makeOutput(inputShape, 'float32');
  const taps = info.filterHeight * info.filterWidth;
  // Room for the transposed filter, then for the list of taps that reach one input position.
  withScratch(backend, taps * info.inChannels * info.outChannels * 4 + taps * 8, (scratch) =>
    simd.conv2dBackpropInput(
      heapAddress(backend, dy),
      heapAddress(backend, filter),
      heapAddress(backend, out),
      scratch,
      ...convGeometry(info, false),
    ),
  );
  return out;
}

/**
 * `Conv2DBackpropInput` for the wasm backend, standing in front of `own`, the backend's kernel:
 * that one is right but a plain scalar loop and takes most of a small CNN's step, so on the SIMD
 * path NHWC gradients come from our SIMD128 kernel; NCHW, and everything on the plain
 * JavaScript path, still go to `own` (whose set-up it keeps).
 */
export function conv2dBackpropInputConfig(own: KernelConfig): KernelConfig {
  return {
    kernelName: Conv2DBackpropInput,
    backendName: 'wasm',
    setupFunc: own.setupFunc,
    disposeFunc: own.disposeFunc,
    kernelFunc: ((args: Conv2DBackpropInputArgs) =>
      conv2dBackpropInputSimd(args) ?? own.kernelFunc(args as never)) as unknown as KernelFunc,
  };
}
