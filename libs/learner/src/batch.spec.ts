import fc from 'fast-check';
import { decodeBatch } from './batch.js';
import { RecordLayoutError } from './errors.js';
import type { RecordLayout } from './model-spec.js';
import { MalformedRecordError, encodeExampleValues as encodeRecord, parseExampleHeader } from '#libs/dataset';

/** Copies a record to an odd offset of a larger buffer, as records sliced out of a chunk are. */
function misaligned(record: Uint8Array, shift: number): Uint8Array {
  const host = new Uint8Array(record.length + shift + 3);
  host.set(record, shift);
  return host.subarray(shift, shift + record.length);
}

const LAYOUT: RecordLayout = {
  featureShape: [2, 3],
  featureDtype: 'uint8',
  scale: 0.5,
  labelDtype: 'int32',
  numClasses: 4,
};

describe('batch', () => {
  it('batch - records decode to the features times scale and the labels, at any alignment', () => {
    const example = fc
      .record({
        shape: fc.array(fc.integer({ min: 1, max: 4 }), { minLength: 1, maxLength: 3 }),
        featureDtype: fc.constantFrom('uint8' as const, 'float32' as const),
        labelDtype: fc.constantFrom('int32' as const, 'float32' as const),
        scale: fc.constantFrom(1, 1 / 255, 0.5),
        count: fc.integer({ min: 1, max: 5 }),
      })
      .chain((c) => {
        const n = c.shape.reduce((a, b) => a * b, 1);
        const value =
          c.featureDtype === 'uint8'
            ? fc.integer({ min: 0, max: 255 })
            : fc.float({ noNaN: true, noDefaultInfinity: true, min: -1e6, max: 1e6 });
        const label =
          c.labelDtype === 'int32' ? fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }) : fc.float({ noNaN: true });
        return fc.record({
          c: fc.constant(c),
          examples: fc.array(
            fc.record({
              features: fc.array(value, { minLength: n, maxLength: n }),
              label,
              shift: fc.integer({ min: 0, max: 3 }),
            }),
            {
              minLength: c.count,
              maxLength: c.count,
            },
          ),
        });
      });
    fc.assert(
      fc.property(example, ({ c, examples }) => {
        const layout: RecordLayout = {
          featureShape: c.shape,
          featureDtype: c.featureDtype,
          scale: c.scale,
          labelDtype: c.labelDtype,
        };
        const records = examples.map((e) => misaligned(encodeRecord(e.features, e.label, layout), e.shift));
        const batch = decodeBatch(records, layout);
        const n = c.shape.reduce((a, b) => a * b, 1);
        expect(batch.size).toBe(examples.length);
        expect(batch.features).toHaveLength(examples.length * n);
        expect(batch.labels).toBeInstanceOf(c.labelDtype === 'int32' ? Int32Array : Float32Array);
        examples.forEach((e, r) => {
          e.features.forEach((v, i) => {
            expect(batch.features[r * n + i]).toBe(Math.fround(Math.fround(v) * c.scale));
          });
          expect(batch.labels[r]).toBe(c.labelDtype === 'int32' ? e.label : Math.fround(e.label));
        });
      }),
    );
  });

  it('batch - the byte layout is the documented one', () => {
    const record = encodeRecord([1, 2, 3, 4, 5, 6], 3, LAYOUT);
    expect(Array.from(record)).toEqual([1, 1, 1, 2, 2, 0, 0, 0, 3, 0, 0, 0, 1, 2, 3, 4, 5, 6, 3, 0, 0, 0]);
    expect(parseExampleHeader(record)).toEqual({
      featureDtype: 'uint8',
      labelDtype: 'int32',
      shape: [2, 3],
      featureCount: 6,
      featuresOffset: 12,
      labelOffset: 18,
    });
  });

  it('batch - records with the same element count but other dims are accepted', () => {
    const record = encodeRecord([1, 2, 3, 4, 5, 6], 1, { ...LAYOUT, featureShape: [6] });
    expect(Array.from(decodeBatch([record], LAYOUT).features)).toEqual([0.5, 1, 1.5, 2, 2.5, 3]);
  });

  it('batch - featureBytes keeps the uint8 features as the records hold them', () => {
    const records = [
      encodeRecord([1, 2, 3, 4, 5, 6], 1, LAYOUT),
      misaligned(encodeRecord([7, 8, 9, 10, 11, 12], 3, LAYOUT), 1),
    ];
    const batch = decodeBatch(records, LAYOUT, { featureBytes: true });
    expect(Array.from(batch.featureBytes!)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
    expect(batch.features).toHaveLength(0);
    expect(Array.from(batch.labels)).toEqual([1, 3]);
    expect(batch.size).toBe(2);
    const floats: RecordLayout = { ...LAYOUT, featureDtype: 'float32' };
    expect(() => decodeBatch([encodeRecord([1, 2, 3, 4, 5, 6], 1, floats)], floats, { featureBytes: true })).toThrow(
      'only uint8 features are kept as bytes (got float32)',
    );
  });

  it('batch - mismatched records are refused with what mismatched', () => {
    const good = encodeRecord([1, 2, 3, 4, 5, 6], 1, LAYOUT);
    const cases: [Uint8Array, RegExp][] = [
      [
        encodeRecord([1, 2, 3, 4, 5, 6], 1, { ...LAYOUT, featureDtype: 'float32' }),
        /record 1 of the batch has float32 features, the layout says uint8/,
      ],
      [
        encodeRecord([1, 2, 3, 4, 5, 6], 1, { ...LAYOUT, labelDtype: 'float32' }),
        /has a float32 label, the layout says int32/,
      ],
      [
        encodeRecord([1, 2, 3, 4], 1, { ...LAYOUT, featureShape: [2, 2] }),
        /dims \[2, 2\] \(4 elements\), the layout's featureShape \[2, 3\] has 6/,
      ],
    ];
    for (const [bad, message] of cases) {
      expect(() => decodeBatch([good, bad], LAYOUT)).toThrow(RecordLayoutError);
      expect(() => decodeBatch([good, bad], LAYOUT)).toThrow(message);
    }
    const malformed: [Uint8Array, RegExp][] = [
      [good.subarray(0, good.length - 1), /record 1 of the batch: length mismatch: expected 22 bytes got 21/],
      [Uint8Array.of(2, 1, 1, 0, 0, 0, 0, 0), /bad format version 2 \(expected 1\)/],
      [Uint8Array.of(1, 9, 1, 0, 0, 0, 0, 0), /unknown feature dtype code 9/],
      [Uint8Array.of(1, 1), /too short: expected at least 4 header bytes/],
    ];
    for (const [bad, message] of malformed) {
      expect(() => decodeBatch([good, bad], LAYOUT)).toThrow(MalformedRecordError);
      expect(() => decodeBatch([good, bad], LAYOUT)).toThrow(message);
    }
  });
});
