import {
  Add,
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
import { frontOf, type DisposingBackend } from './front.js';

/** The kernels the product form runs, as `backendName` has them. */
const USED_KERNELS = [PadV2, Slice, Concat, Reshape, BatchMatMul, Sum, Add] as const;

/**
 * Memory the input patches may take at once: 256 MiB. A batch whose patches need more is taken
 * in groups of images, whose gradients are added up.
 */
export const PATCHES_BYTES = 256 * 1024 * 1024;

/**
 * Conv2DBackpropFilter, for stride 1 and channels last, as one batched matrix product: each
 * image's filter gradient is `patchesᵀ · dy` (its input patches, one row per output position and
 * `filterHeight · filterWidth · inChannels` columns, against the output gradient's rows), and
 * the images' gradients are summed. TF.js's WebGPU kernel gives each filter element one thread,
 * which then runs through every image and position alone: 227 ms of a 303 ms training step for
 * the first layer of the bench's CNN at batch 1,024 on an NVIDIA H200. The product spreads the
 * same sums over images and filter elements. Built from `backendName`'s own kernels (padding,
 * slices, concatenation, batched product, sum, add), so it runs on any backend that has them.
 * A batch whose patches would take more than `patchesBytes` goes in groups of images, whose
 * gradients are added. Undefined (the backend's own kernel then) for strides other than 1,
 * channels first, an empty dimension, or taps that reach past the padded input.
 */
export function conv2dBackpropFilterByProducts(
  { inputs, backend, attrs }: Conv2DBackpropFilterArgs<DisposingBackend>,
  backendName: string,
  patchesBytes = PATCHES_BYTES,
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
  const [padV2, slice, concat, reshape, batchMatMul, sum, add] = kernels as NonNullable<(typeof kernels)[number]>[];
  const { batchSize, inChannels, outChannels, outHeight, outWidth, filterHeight, filterWidth } = info;
  const paddedShape = [info.inHeight + top + bottom, info.inWidth + left + right];
  const rows = outHeight * outWidth;
  const columns = filterHeight * filterWidth * inChannels;
  const group = Math.max(1, Math.min(batchSize, Math.floor(patchesBytes / (rows * columns * 4))));
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
    /** The filter gradient of `n` images from `start`, as `[columns, outChannels]`. */
    const ofGroup = (start: number, n: number): TensorInfo => {
      const xs =
        n === batchSize
          ? padded
          : run(slice, { x: padded }, { begin: [start, 0, 0, 0], size: [n, ...paddedShape, inChannels] });
      const dys =
        n === batchSize
          ? dy
          : run(slice, { x: dy }, { begin: [start, 0, 0, 0], size: [n, outHeight, outWidth, outChannels] });
      const taps: TensorInfo[] = [];
      for (let r = 0; r < filterHeight; r++) {
        for (let c = 0; c < filterWidth; c++) {
          taps.push(run(slice, { x: xs }, { begin: [0, r, c, 0], size: [n, outHeight, outWidth, inChannels] }));
        }
      }
      const patches = taps.length === 1 ? taps[0]! : run(concat, taps, { axis: 3 });
      const perImage = run(
        batchMatMul,
        {
          a: run(reshape, { x: patches }, { shape: [n, rows, columns] }),
          b: run(reshape, { x: dys }, { shape: [n, rows, outChannels] }),
        },
        { transposeA: true, transposeB: false },
      );
      return run(sum, { x: perImage }, { axis: [0], keepDims: false });
    };
    let summed = ofGroup(0, group);
    for (let start = group; start < batchSize; start += group) {
      summed = run(add, { a: summed, b: ofGroup(start, Math.min(group, batchSize - start)) }, {});
    }
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
