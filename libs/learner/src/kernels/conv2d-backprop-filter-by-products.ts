import {
  backend_util,
  BatchMatMul,
  Concat,
  getKernel,
  PadV2,
  Reshape,
  Slice,
  Sum,
  type KernelConfig,
  type TensorInfo,
} from '@tensorflow/tfjs';
import type { Conv2DBackpropFilterArgs } from './conv2d-backprop-filter.js';
import { frontOf } from './front.js';

/** What a backend's kernels need of it here: disposing of the intermediates. */
interface DisposingBackend {
  disposeData(dataId: TensorInfo['dataId']): boolean;
}

/** The kernels the product form runs, as `backendName` has them. */
const USED_KERNELS = [PadV2, Slice, Concat, Reshape, BatchMatMul, Sum] as const;

/**
 * Conv2DBackpropFilter, for stride 1 and channels last, as one batched matrix product: each
 * image's filter gradient is `patchesᵀ · dy` (its input patches, one row per output position and
 * `filterHeight · filterWidth · inChannels` columns, against the output gradient's rows), and
 * the images' gradients are summed. TF.js's WebGPU kernel gives each filter element one thread,
 * which then runs through every image and position alone: 227 ms of a 303 ms training step for
 * the first layer of the bench's CNN at batch 1,024 on an NVIDIA H200. The product spreads the
 * same sums over images and filter elements. Built from `backendName`'s own kernels (padding,
 * slices, concatenation, batched product, sum), so it runs on any backend that has them;
 * undefined (the backend's own kernel then) for strides other than 1, channels first, an empty
 * dimension, or taps that reach past the padded input.
 */
export function conv2dBackpropFilterByProducts(
  { inputs, backend, attrs }: Conv2DBackpropFilterArgs<DisposingBackend>,
  backendName: string,
): TensorInfo | undefined {
  const { x, dy } = inputs;
  const { strides, pad, dataFormat, dimRoundingMode, filterShape } = attrs;
  if (dataFormat === 'NCHW') return undefined;
  if (![...x.shape, ...dy.shape, ...filterShape].every((d) => d > 0)) return undefined;
  const info = backend_util.computeConv2DInfo(
    x.shape as [number, number, number, number],
    filterShape,
    strides,
    1,
    pad,
    dimRoundingMode,
  );
  if (info.strideHeight !== 1 || info.strideWidth !== 1) return undefined;
  const { top, bottom, left, right } = info.padInfo;
  // Every tap's slice must lie inside the padded input (TF.js's geometry for a number as the
  // padding works the width out with the filter's height, so it need not).
  if (info.inHeight + top + bottom < info.outHeight + info.filterHeight - 1) return undefined;
  if (info.inWidth + left + right < info.outWidth + info.filterWidth - 1) return undefined;
  const kernels = USED_KERNELS.map((name) => getKernel(name, backendName)?.kernelFunc);
  if (kernels.some((k) => k === undefined)) return undefined;
  const [padV2, slice, concat, reshape, batchMatMul, sum] = kernels as NonNullable<(typeof kernels)[number]>[];
  const { batchSize, inChannels, outChannels, outHeight, outWidth, filterHeight, filterWidth } = info;
  const made: TensorInfo[] = [];
  const run = (kernel: (typeof kernels)[number], kernelInputs: object, kernelAttrs: object): TensorInfo => {
    const out = kernel!({ inputs: kernelInputs as never, backend: backend as never, attrs: kernelAttrs as never });
    made.push(out as TensorInfo);
    return out as TensorInfo;
  };
  try {
    const padded =
      top + bottom + left + right === 0
        ? x
        : run(
            padV2,
            { x },
            {
              paddings: [
                [0, 0],
                [top, bottom],
                [left, right],
                [0, 0],
              ],
              constantValue: 0,
            },
          );
    const taps: TensorInfo[] = [];
    for (let r = 0; r < filterHeight; r++) {
      for (let c = 0; c < filterWidth; c++) {
        taps.push(
          run(slice, { x: padded }, { begin: [0, r, c, 0], size: [batchSize, outHeight, outWidth, inChannels] }),
        );
      }
    }
    const patches = taps.length === 1 ? taps[0]! : run(concat, taps, { axis: 3 });
    const rows = outHeight * outWidth;
    const perImage = run(
      batchMatMul,
      {
        a: run(reshape, { x: patches }, { shape: [batchSize, rows, filterHeight * filterWidth * inChannels] }),
        b: run(reshape, { x: dy }, { shape: [batchSize, rows, outChannels] }),
      },
      { transposeA: true, transposeB: false },
    );
    const summed = run(sum, { x: perImage }, { axis: [0], keepDims: false });
    const result = run(reshape, { x: summed }, { shape: filterShape });
    made.pop();
    return result;
  } finally {
    for (const info of made) backend.disposeData(info.dataId);
  }
}

/**
 * Our Conv2DBackpropFilter in front of `own`, `backendName`'s (see
 * {@link conv2dBackpropFilterByProducts}).
 */
export function conv2dBackpropFilterByProductsConfig(own: KernelConfig): KernelConfig {
  return frontOf(own, (args: Conv2DBackpropFilterArgs<DisposingBackend>) =>
    conv2dBackpropFilterByProducts(args, own.backendName),
  );
}
