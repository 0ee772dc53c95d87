import type { backend_util } from '@tensorflow/tfjs';

/**
 * Calls `visit` once for every (output position, filter tap) of a depthwise conv2d (NHWC) whose
 * input position lies inside the image (padding skipped), with the flat offsets of channel 0 of
 * that input position, output-gradient position and filter tap. Both depthwise gradients walk
 * the same taps and differ only in what they accumulate per channel.
 */
export function forEachDepthwiseTap(
  info: backend_util.Conv2DInfo,
  visit: (xBase: number, dyBase: number, filterBase: number) => void,
): void {
  const { batchSize, inHeight, inWidth, inChannels, outHeight, outWidth, outChannels } = info;
  const { filterHeight, filterWidth, strideHeight, strideWidth, dilationHeight, dilationWidth } = info;
  const chMul = outChannels / inChannels;
  const top = info.padInfo.top;
  const left = info.padInfo.left;
  for (let b = 0; b < batchSize; b++) {
    for (let yR = 0; yR < outHeight; yR++) {
      for (let wR = 0; wR < filterHeight; wR++) {
        const xR = yR * strideHeight + wR * dilationHeight - top;
        if (xR < 0 || xR >= inHeight) continue;
        for (let yC = 0; yC < outWidth; yC++) {
          const dyBase = ((b * outHeight + yR) * outWidth + yC) * outChannels;
          for (let wC = 0; wC < filterWidth; wC++) {
            const xC = yC * strideWidth + wC * dilationWidth - left;
            if (xC < 0 || xC >= inWidth) continue;
            visit(
              ((b * inHeight + xR) * inWidth + xC) * inChannels,
              dyBase,
              (wR * filterWidth + wC) * inChannels * chMul,
            );
          }
        }
      }
    }
  }
}
