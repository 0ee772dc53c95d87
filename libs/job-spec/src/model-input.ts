/** Height, width and channels of an image input. */
export type ImageShape = [height: number, width: number, channels: number];

/** Number of feature values in one example: the product of the feature shape. */
export function featureCount(featureShape: readonly number[]): number {
  return featureShape.reduce((n, d) => n * d, 1);
}

/**
 * The image shape the cnn preset reads a feature shape as: `[h, w, c]` as is, `[n]` with n a
 * perfect square as `[sqrt(n), sqrt(n), 1]`; undefined for any other shape.
 */
export function cnnInputShape(featureShape: readonly number[]): ImageShape | undefined {
  if (featureShape.length === 3) return [featureShape[0]!, featureShape[1]!, featureShape[2]!];
  if (featureShape.length === 1) {
    const side = Math.round(Math.sqrt(featureShape[0]!));
    if (side * side === featureShape[0]) return [side, side, 1];
  }
  return undefined;
}

/**
 * How many convolution layers of the cnn preset an image fits: each 2x2 pooling halves height
 * and width (rounding down), and neither may reach 0.
 */
export function maxCnnLayers(image: ImageShape): number {
  let layers = 0;
  for (let side = Math.min(image[0], image[1]); side >= 2; side = Math.floor(side / 2)) layers++;
  return layers;
}
