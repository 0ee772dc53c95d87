import fc from 'fast-check';
import type { PlainTensor } from '#libs/learner';
import { clipGradients, globalNorm } from './gradient-clipping.js';

const tensor = (name: string, values: number[]): PlainTensor => ({
  name,
  dtype: 'float32',
  shape: [values.length],
  data: Float32Array.from(values),
});

const value = fc.float({ min: -100, max: 100, noNaN: true, noDefaultInfinity: true }).map(Math.fround);

/** One to four float32 tensors of up to 12 elements: a gradient as a trainer pushes it. */
const update = fc
  .array(fc.array(value, { minLength: 1, maxLength: 12 }), { minLength: 1, maxLength: 4 })
  .map((tensors) => tensors.map((values, i) => tensor(`p${i}`, values)));

const copyOf = (u: PlainTensor[]) => u.map((t) => Array.from(t.data));

describe('gradient clipping', () => {
  it('gradient clipping - the norm is the global one over every tensor', () => {
    expect(globalNorm([tensor('a', [3]), tensor('b', [0, 4])])).toBe(5);
    const clipped = clipGradients([tensor('a', [3]), tensor('b', [0, 4])], { clipNorm: 1 });
    expect(clipped.map((t) => Array.from(t.data))).toEqual([[0.6], [0, 0.8]].map((a) => a.map(Math.fround)));
  });

  it('gradient clipping - clipNorm scales a longer gradient to that norm, keeping its direction, as tf.clip_by_global_norm', () => {
    fc.assert(
      fc.property(update, fc.double({ min: 0.01, max: 100, noNaN: true }), (given, clipNorm) => {
        const before = copyOf(given);
        const norm = globalNorm(given);
        const clipped = clipGradients(given, { clipNorm });
        expect(copyOf(given)).toEqual(before);
        const scale = clipNorm / Math.max(norm, clipNorm);
        clipped.forEach((t, k) => t.data.forEach((x, i) => expect(x).toBeCloseTo(before[k]![i]! * scale, 4)));
        expect(globalNorm(clipped)).toBeLessThanOrEqual(clipNorm * (1 + 1e-6));
        if (norm <= clipNorm) clipped.forEach((t, k) => expect(t).toBe(given[k]));
      }),
      { numRuns: 200 },
    );
  });

  it('gradient clipping - clipValue bounds every element and leaves the others exact', () => {
    fc.assert(
      fc.property(update, fc.double({ min: 0.01, max: 50, noNaN: true }), (given, clipValue) => {
        const clipped = clipGradients(given, { clipValue });
        clipped.forEach((t, k) =>
          t.data.forEach((x, i) => {
            const original = given[k]!.data[i]!;
            expect(x).toBe(Math.abs(original) <= clipValue ? original : Math.fround(Math.sign(original) * clipValue));
          }),
        );
      }),
      { numRuns: 200 },
    );
  });

  it('gradient clipping - both: the norm first, then the elements; nothing asked, nothing done', () => {
    const given = [tensor('a', [30, -40])];
    expect(Array.from(clipGradients(given, { clipNorm: 10, clipValue: 7 })[0]!.data)).toEqual([6, -7]);
    expect(clipGradients(given)).toBe(given);
    expect(clipGradients(given, { clipNorm: undefined, clipValue: undefined })).toBe(given);
    const ints: PlainTensor = { name: 'step', dtype: 'int32', shape: [1], data: Int32Array.of(1000) };
    expect(clipGradients([ints], { clipNorm: 1, clipValue: 1 })[0]).toBe(ints);
  });
});
