import * as tf from '@tensorflow/tfjs';
import fc from 'fast-check';
import { conv2dBackpropFilterByProducts } from './conv2d-backprop-filter-by-products.js';

type Shape4 = [number, number, number, number];
type Pad = 'valid' | 'same' | number | [[0, 0], [number, number], [number, number], [0, 0]];

/** A channels-last conv2d: its input, filter, padding and values' seed. */
const CASES = fc.record({
  batch: fc.integer({ min: 1, max: 5 }),
  height: fc.integer({ min: 1, max: 9 }),
  width: fc.integer({ min: 1, max: 9 }),
  inChannels: fc.integer({ min: 1, max: 5 }),
  outChannels: fc.integer({ min: 1, max: 5 }),
  filterHeight: fc.integer({ min: 1, max: 4 }),
  filterWidth: fc.integer({ min: 1, max: 4 }),
  pad: fc.oneof(
    fc.constantFrom<Pad>('valid', 'same'),
    fc.integer({ min: 0, max: 2 }),
    fc.tuple(fc.nat(2), fc.nat(2), fc.nat(2), fc.nat(2)).map(([t, b, l, r]): Pad => [
      [0, 0],
      [t, b],
      [l, r],
      [0, 0],
    ]),
  ),
});

/** The filter gradient by our product form on the cpu backend, and by the cpu backend's own kernel. */
function bothWays(
  x: tf.Tensor4D,
  dy: tf.Tensor4D,
  filterShape: Shape4,
  pad: Pad,
  strides: number | [number, number] = 1,
  patchesBytes?: number,
): { ours: tf.Tensor | undefined; own: tf.Tensor } {
  const attrs = { strides, pad, dataFormat: 'NHWC' as const, filterShape };
  const backend = tf.backend() as unknown as Parameters<typeof conv2dBackpropFilterByProducts>[0]['backend'];
  const info = conv2dBackpropFilterByProducts({ inputs: { x, dy }, backend, attrs }, 'cpu', patchesBytes);
  const ours = info === undefined ? undefined : tf.engine().makeTensorFromTensorInfo(info);
  const own = tf.engine().runKernel('Conv2DBackpropFilter', { x, dy }, attrs) as tf.Tensor;
  return { ours, own };
}

describe('Conv2DBackpropFilter as batched products', () => {
  beforeAll(async () => {
    await tf.setBackend('cpu');
  });

  it('conv2d filter gradient by products - equals the backend kernel for stride 1, any padding and shape, in groups of images too', () => {
    fc.assert(
      // A limit on the patches' bytes of 1 takes the images one by one.
      fc.property(CASES, fc.integer(), fc.option(fc.integer({ min: 1, max: 6000 })), (c, seed, patchesBytes) => {
        const xShape: Shape4 = [c.batch, c.height, c.width, c.inChannels];
        const filterShape: Shape4 = [c.filterHeight, c.filterWidth, c.inChannels, c.outChannels];
        const info = tf.backend_util.computeConv2DInfo(xShape, filterShape, 1, 1, c.pad as never);
        fc.pre(info.outHeight > 0 && info.outWidth > 0);
        tf.tidy(() => {
          const x = tf.randomUniform(xShape, -1, 1, 'float32', seed) as tf.Tensor4D;
          const dy = tf.randomUniform(info.outShape, -1, 1, 'float32', seed + 1) as tf.Tensor4D;
          const dataIds = tf.engine().backend.numDataIds();
          const { ours, own } = bothWays(x, dy, filterShape, c.pad, 1, patchesBytes ?? undefined);
          const { top, bottom, left, right } = info.padInfo;
          if (
            c.height + top + bottom < info.outHeight + c.filterHeight - 1 ||
            c.width + left + right < info.outWidth + c.filterWidth - 1
          ) {
            // TF.js's geometry for a number as the padding (the width worked out with the
            // filter's height) can leave taps past the input: the backend's kernel takes those.
            expect(ours).toBeUndefined();
            return;
          }
          expect(ours).toBeDefined();
          expect(ours!.shape).toEqual(filterShape);
          const expected = own.dataSync();
          const actual = ours!.dataSync();
          for (let i = 0; i < expected.length; i++) {
            expect(Math.abs(actual[i]! - expected[i]!)).toBeLessThanOrEqual(
              1e-5 * (1 + Math.abs(expected[i]!)) * c.batch * 16,
            );
          }
          // Only the two results are left: every intermediate is disposed of.
          expect(tf.engine().backend.numDataIds()).toBe(dataIds + 2);
        });
      }),
      { numRuns: 120 },
    );
  });

  it('conv2d filter gradient by products - leaves strides over 1 and channels first to the backend', () => {
    tf.tidy(() => {
      const x = tf.ones([2, 6, 6, 3]) as tf.Tensor4D;
      const dy = tf.ones([2, 3, 3, 4]) as tf.Tensor4D;
      expect(bothWays(x, dy, [2, 2, 3, 4], 'valid', 2).ours).toBeUndefined();
      const backend = tf.backend() as never;
      const nchw = {
        strides: 1,
        pad: 'valid' as const,
        dataFormat: 'NCHW' as const,
        filterShape: [1, 1, 3, 4] as Shape4,
      };
      expect(conv2dBackpropFilterByProducts({ inputs: { x, dy }, backend, attrs: nchw }, 'cpu')).toBeUndefined();
    });
  });
});
