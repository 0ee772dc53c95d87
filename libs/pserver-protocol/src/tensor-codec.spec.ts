import fc from 'fast-check';
import {
  DataType,
  MalformedTensorError,
  TensorAssembler,
  decodeBfloat16,
  decodeFloat16,
  encodeBfloat16,
  encodeFloat16,
  float32Values,
  tensorParts,
  toNamedTensor,
  type NamedTensor,
  type TensorArray,
} from './index.js';

const arrays: fc.Arbitrary<TensorArray> = fc.oneof(
  fc.array(fc.float({ noNaN: true })).map((v) => Float32Array.from(v)),
  fc.array(fc.double({ noNaN: true })).map((v) => Float64Array.from(v)),
  fc.array(fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 })).map((v) => Int32Array.from(v)),
  fc.array(fc.nat()).map((v) => Uint32Array.from(v)),
  fc.array(fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n })).map((v) => BigInt64Array.from(v)),
  fc.array(fc.bigInt({ min: 0n, max: 2n ** 64n - 1n })).map((v) => BigUint64Array.from(v)),
);

describe('tensor codec', () => {
  it('tensor codec - parts of any size reassemble to the same tensor', () => {
    fc.assert(
      fc.property(arrays, fc.integer({ min: 1, max: 64 }), (data, chunk) => {
        const tensor: NamedTensor<TensorArray> = { name: 'x', shape: [data.length], data };
        const parts = [...tensorParts(tensor, chunk)];
        expect(parts.every((p) => p.data.length <= Math.max(chunk, 8))).toBe(true);
        const assembler = new TensorAssembler();
        const done = parts.map((p) => assembler.add(p));
        expect(done.slice(0, -1).every((d) => d === undefined)).toBe(true);
        const back = toNamedTensor(done.at(-1)!);
        expect(back.shape).toEqual([data.length]);
        expect(back.data).toEqual(data);
        expect(assembler.finish()).toHaveLength(1);
      }),
    );
  });

  it('tensor codec - an 8 MiB tensor goes in 1 MiB parts', () => {
    const data = new Float32Array(2 * 1024 * 1024).map((_, i) => i);
    const parts = [...tensorParts({ name: 'big', shape: [2048, 1024], data })];
    expect(parts).toHaveLength(8);
    expect(parts.map((p) => p.offset)).toEqual([0, 1, 2, 3, 4, 5, 6, 7].map((i) => i * 1024 * 1024));
  });

  it('tensor codec - parts out of order, overruns, dtype changes and short streams are refused', () => {
    const data = new Float32Array(8).fill(1);
    const [p0, p1] = [...tensorParts({ name: 'w', shape: [8], data }, 16)];
    const a = new TensorAssembler();
    expect(() => a.add(p1)).toThrow(/part at byte 16, expected the part at byte 0/);
    const b = new TensorAssembler();
    b.add(p0);
    expect(() => b.add({ ...p1, dtype: DataType.FLOAT64 })).toThrow(/earlier parts said float32 \[8\]/);
    expect(() => b.add({ ...p1, data: Buffer.alloc(32) })).toThrow(/overruns/);
    expect(() => b.finish()).toThrow(/ended after 16 of 32 bytes/);
    const c = new TensorAssembler();
    expect(() => c.add({ ...p0, dtype: 99 as DataType })).toThrow(MalformedTensorError);
    expect(() => c.add({ ...p0, shape: [1e6, 1e6] })).toThrow(/exceed the limit/);
    expect(() => c.add({ ...p0, shape: [-1] })).toThrow(/invalid dimension -1/);
    expect(() => c.add({ ...p0, name: '' })).toThrow(/has no name/);
    const d = new TensorAssembler();
    [...tensorParts({ name: 'w', shape: [8], data })].forEach((p) => d.add(p));
    expect(() => d.add(p0)).toThrow(/sent twice/);
  });

  it('tensor codec - the expectation sees each tensor once, before its data', () => {
    const seen: string[] = [];
    const a = new TensorAssembler((name, dtype, shape) => {
      seen.push(`${name}:${dtype}:${shape.join('x')}`);
      if (name === 'bad') throw new Error('refused');
    });
    for (const p of tensorParts({ name: 'w', shape: [2, 4], data: new Float32Array(8) }, 8)) a.add(p);
    expect(seen).toEqual([`w:${DataType.FLOAT32}:2x4`]);
    expect(() => a.add([...tensorParts({ name: 'bad', shape: [1], data: new Float32Array(1) })][0])).toThrow('refused');
  });

  it('tensor codec - a scalar and an empty tensor travel as one part', () => {
    const scalar = [...tensorParts({ name: 's', shape: [], data: Float32Array.of(3) })];
    const empty = [...tensorParts({ name: 'e', shape: [0, 4], data: new Float32Array(0) })];
    expect(scalar).toHaveLength(1);
    expect(empty).toHaveLength(1);
    const a = new TensorAssembler();
    expect(a.add(scalar[0])?.shape).toEqual([]);
    expect(a.add(empty[0])?.bytes.length).toBe(0);
    expect(() => [...tensorParts({ name: 'm', shape: [3], data: new Float32Array(2) })]).toThrow(
      /does not match 2 elements/,
    );
  });

  it('tensor codec - a float32 tensor sent as float16 or bfloat16 arrives as its rounded float32 values', () => {
    const halves = [
      [DataType.FLOAT16, encodeFloat16, decodeFloat16],
      [DataType.BFLOAT16, encodeBfloat16, decodeBfloat16],
    ] as const;
    fc.assert(
      fc.property(
        fc.array(fc.float(), { maxLength: 300 }),
        fc.integer({ min: 1, max: 64 }),
        fc.constantFrom(...halves),
        (values, chunk, [dtype, encode, decode]) => {
          const data = Float32Array.from(values);
          const parts = [...tensorParts({ name: 'g', shape: [data.length], data }, chunk, dtype)];
          expect(parts.every((p) => p.dtype === dtype)).toBe(true);
          expect(parts.reduce((n, p) => n + p.data.length, 0)).toBe(2 * data.length);
          const assembler = new TensorAssembler();
          parts.forEach((p) => assembler.add(p));
          const [assembled] = assembler.finish();
          const rounded = new Uint16Array(data.length);
          encode(data, rounded);
          const expected = new Float32Array(data.length);
          decode(rounded, expected);
          expect(float32Values(assembled)).toEqual(expected);
          expect(toNamedTensor(assembled).data).toEqual(expected);
          // The sender's values are left as they were.
          expect(data).toEqual(Float32Array.from(values));
        },
      ),
    );
  });

  it('tensor codec - only float32 travels as float16 or bfloat16, and only floats decode to float32', () => {
    const ints = { name: 'steps', shape: [2], data: Int32Array.of(1, 2) };
    expect(() => [...tensorParts(ints, undefined, DataType.FLOAT16)]).toThrow(
      /"steps": cannot travel as float16: it holds int32/,
    );
    const doubles = { name: 'w', shape: [1], data: Float64Array.of(1) };
    expect(() => [...tensorParts(doubles, undefined, DataType.FLOAT32)]).toThrow(/cannot travel as float32/);
    const [part] = [...tensorParts(ints)];
    const assembled = new TensorAssembler().add(part)!;
    expect(() => float32Values(assembled)).toThrow(/"steps": expected float32, float16 or bfloat16, got int32/);
  });
});
