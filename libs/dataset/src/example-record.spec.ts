import fc from 'fast-check';
import { decodeExample, encodeExample, exampleRecordSize, type Example } from './example-record.js';
import { InvalidExampleError, MalformedRecordError } from './errors.js';

const shapeArb = fc.array(fc.integer({ min: 0, max: 5 }), { maxLength: 4 });

const exampleArb: fc.Arbitrary<Example> = fc
  .tuple(shapeArb, fc.boolean(), fc.constantFrom('int32' as const, 'float32' as const))
  .chain(([shape, uint8, labelDtype]) => {
    const n = shape.reduce((a, d) => a * d, 1);
    const features = uint8
      ? fc.uint8Array({ minLength: n, maxLength: n })
      : fc.float32Array({ minLength: n, maxLength: n, noDefaultInfinity: false });
    const label =
      labelDtype === 'int32' ? fc.integer({ min: -0x8000_0000, max: 0x7fff_ffff }) : fc.float({ noNaN: true });
    return fc.record({ features, shape: fc.constant(shape), labelDtype: fc.constant(labelDtype), label });
  });

/** A valid record to corrupt: uint8 features of shape [2, 3], int32 label 7. */
function sampleRecord(): Uint8Array {
  return encodeExample({ features: Uint8Array.of(1, 2, 3, 4, 5, 6), shape: [2, 3], labelDtype: 'int32', label: 7 });
}

test('example record - decode(encode(x)) gives x back, byte for byte', () => {
  fc.assert(
    fc.property(exampleArb, (example) => {
      const record = encodeExample(example);
      const featureDtype = example.features instanceof Uint8Array ? 'uint8' : 'float32';
      expect(record.length).toBe(exampleRecordSize(example.shape, featureDtype));
      const decoded = decodeExample(record);
      expect(decoded.featureDtype).toBe(featureDtype);
      expect(decoded.shape).toEqual(example.shape);
      expect(decoded.labelDtype).toBe(example.labelDtype);
      expect(Object.is(decoded.label, example.label)).toBe(true);
      expect(decoded.features.constructor).toBe(example.features.constructor);
      const bytes = (a: Uint8Array | Float32Array): Buffer => Buffer.from(a.buffer, a.byteOffset, a.byteLength);
      expect(bytes(decoded.features).equals(bytes(example.features))).toBe(true);
    }),
    { numRuns: 300 },
  );
});

test('example record - decodes a record at an odd offset inside a larger buffer', () => {
  const features = Float32Array.of(1.5, -2, 3.25);
  const record = encodeExample({ features, shape: [3], labelDtype: 'float32', label: 0.5 });
  const host = new Uint8Array(record.length + 3);
  host.set(record, 1);
  const decoded = decodeExample(host.subarray(1, 1 + record.length));
  expect(Array.from(decoded.features)).toEqual([1.5, -2, 3.25]);
  expect(decoded.label).toBe(0.5);
});

test('example record - has the documented layout', () => {
  const record = encodeExample({ features: Uint8Array.of(9, 8), shape: [1, 2], labelDtype: 'int32', label: -2 });
  expect(Buffer.from(record).toString('hex')).toBe('0101010201000000020000000908feffffff');
});

test('example record - a bad version is refused', () => {
  const record = sampleRecord();
  record[0] = 2;
  expect(() => decodeExample(record)).toThrow(MalformedRecordError);
  expect(() => decodeExample(record)).toThrow(/example record: bad format version 2/);
});

test('example record - unknown dtypes are refused', () => {
  const badFeature = sampleRecord();
  badFeature[1] = 7;
  expect(() => decodeExample(badFeature)).toThrow(/unknown feature dtype code 7/);
  const badLabel = sampleRecord();
  badLabel[2] = 0;
  expect(() => decodeExample(badLabel)).toThrow(/unknown label dtype code 0/);
});

test('example record - a length mismatch says how many bytes were expected', () => {
  const record = sampleRecord();
  expect(record.length).toBe(4 + 8 + 6 + 4);
  expect(() => decodeExample(record.subarray(0, 21))).toThrow('length mismatch: expected 22 bytes got 21');
  const longer = new Uint8Array(23);
  longer.set(record);
  expect(() => decodeExample(longer)).toThrow('length mismatch: expected 22 bytes got 23');
  expect(() => decodeExample(record.subarray(0, 6))).toThrow(/length mismatch: expected at least 12 bytes/);
  expect(() => decodeExample(new Uint8Array(0))).toThrow(MalformedRecordError);
});

test('example record - every truncation of a valid record is refused', () => {
  const record = sampleRecord();
  for (let n = 0; n < record.length; n++) {
    expect(() => decodeExample(record.subarray(0, n))).toThrow(MalformedRecordError);
  }
});

test('example record - inconsistent examples are refused by the encoder', () => {
  expect(() => encodeExample({ features: new Uint8Array(5), shape: [2, 3], labelDtype: 'int32', label: 1 })).toThrow(
    InvalidExampleError,
  );
  expect(() => encodeExample({ features: new Uint8Array(1), shape: [1], labelDtype: 'int32', label: 1.5 })).toThrow(
    /not an int32/,
  );
  expect(() => encodeExample({ features: new Uint8Array(1), shape: [1], labelDtype: 'int32', label: 2 ** 31 })).toThrow(
    /not an int32/,
  );
  expect(() => encodeExample({ features: new Uint8Array(0), shape: [-1], labelDtype: 'int32', label: 0 })).toThrow(
    /invalid dimension/,
  );
});
