import fc from 'fast-check';
import { decodeBfloat16, decodeFloat16, encodeBfloat16, encodeFloat16 } from './index.js';

/** Every 16-bit pattern, in order. */
const ALL_HALVES = Uint16Array.from({ length: 65536 }, (_, h) => h);

/** The value of a float16 from its definition (sign, 5-bit exponent biased by 15, 10-bit mantissa). */
function float16Value(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exponent = (h >>> 10) & 0x1f;
  const mantissa = h & 0x3ff;
  if (exponent === 0x1f) return mantissa === 0 ? sign * Infinity : NaN;
  if (exponent === 0) return sign * mantissa * 2 ** -24;
  return sign * (1 + mantissa / 1024) * 2 ** (exponent - 15);
}

/** The value of a bfloat16: a float32 whose low 16 bits are zero. */
function bfloat16Value(h: number): number {
  const view = new DataView(new ArrayBuffer(4));
  view.setUint32(0, h << 16);
  return view.getFloat32(0);
}

function float32Bits(x: number): number {
  const view = new DataView(new ArrayBuffer(4));
  view.setFloat32(0, x);
  return view.getUint32(0);
}

/**
 * The 16-bit pattern nearest to `x` among the finite patterns of a format, given their values
 * ascending (`values[k]` is pattern `k`); ties go to the even pattern, and anything at or past
 * the tie between the largest finite value and the next power of two (the "value" of infinity in
 * round to nearest) becomes infinity. Written from the rounding rule alone, with no bit tricks.
 */
function nearest(x: number, values: readonly number[], overflow: number, infinity: number): number {
  if (Number.isNaN(x)) return -1;
  const sign = x < 0 || Object.is(x, -0) ? 0x8000 : 0;
  const a = Math.abs(x);
  if (a >= overflow) return sign | infinity;
  let lo = 0;
  let hi = values.length - 1;
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (values[mid] <= a) lo = mid;
    else hi = mid;
  }
  if (a === values[lo]) return sign | lo;
  if (a >= values[hi]) return sign | hi;
  const below = a - values[lo];
  const above = values[hi] - a;
  const pick = below < above ? lo : above < below ? hi : lo % 2 === 0 ? lo : hi;
  return sign | pick;
}

/** Values of the positive finite float16 patterns 0x0000..0x7bff. */
const FLOAT16_VALUES = Array.from({ length: 0x7c00 }, (_, h) => float16Value(h));
/** Values of the positive finite bfloat16 patterns 0x0000..0x7f7f. */
const BFLOAT16_VALUES = Array.from({ length: 0x7f80 }, (_, h) => bfloat16Value(h));
const FLOAT16_OVERFLOW = 65520; // halfway between 65504 and 2^16
const BFLOAT16_OVERFLOW = (2 - 2 ** -8) * 2 ** 127; // halfway between the largest bfloat16 and 2^128

function referenceFloat16(x: number): number {
  return nearest(x, FLOAT16_VALUES, FLOAT16_OVERFLOW, 0x7c00);
}

function referenceBfloat16(x: number): number {
  return nearest(x, BFLOAT16_VALUES, BFLOAT16_OVERFLOW, 0x7f80);
}

function encoded(encode: (from: Float32Array, to: Uint16Array) => void, values: Float32Array): Uint16Array {
  const out = new Uint16Array(values.length);
  encode(values, out);
  return out;
}

/** Checks every value's encoding against the reference; a NaN must encode to a NaN of its sign. */
function expectEncodings(
  encode: (from: Float32Array, to: Uint16Array) => void,
  reference: (x: number) => number,
  value: (h: number) => number,
  inputs: Float32Array,
): void {
  const out = encoded(encode, inputs);
  const wrong: string[] = [];
  inputs.forEach((x, i) => {
    const h = out[i];
    const ok = Number.isNaN(x)
      ? Number.isNaN(value(h)) && (h & 0x8000) === (float32Bits(x) & 0x80000000) >>> 16
      : h === reference(x);
    if (!ok && wrong.length < 5) wrong.push(`${x} (0x${float32Bits(x).toString(16)}) -> 0x${h.toString(16)}`);
  });
  expect(wrong).toEqual([]);
}

/** Every midpoint between neighbouring finite patterns of a format, and the float32 on either side. */
function midpoints(values: readonly number[]): Float32Array {
  const out: number[] = [];
  for (let k = 0; k + 1 < values.length; k++) {
    const mid = (values[k] + values[k + 1]) / 2;
    const bits = float32Bits(mid);
    for (const b of [bits - 1, bits, bits + 1]) {
      const view = new DataView(new ArrayBuffer(4));
      view.setUint32(0, b);
      out.push(view.getFloat32(0));
    }
  }
  return Float32Array.from([...out, ...out.map((x) => -x)]);
}

const EDGE_CASES = Float32Array.from([
  0,
  -0,
  1,
  -1,
  65504,
  65505,
  65519,
  65519.998046875,
  65520,
  65536,
  -65520,
  1e10,
  3.4028234663852886e38,
  -3.4028234663852886e38,
  Infinity,
  -Infinity,
  NaN,
  2 ** -14,
  2 ** -14 - 2 ** -25,
  2 ** -24,
  2 ** -25,
  2 ** -25 + 2 ** -40,
  3 * 2 ** -26,
  2 ** -26,
  1.401298464324817e-45, // the smallest float32 subnormal
  1.1754942106924411e-38, // the largest float32 subnormal
  1.1754943508222875e-38, // the smallest float32 normal
  0.1,
  1 / 3,
  Math.PI,
]);

/** NaNs with assorted payloads and signs, as float32 bit patterns. */
const NAN_BITS = Uint32Array.from([0x7fc00000, 0x7f800001, 0x7fbfffff, 0xffc00000, 0xff800001, 0x7f801000, 0xffffffff]);

describe('half precision', () => {
  it('half precision - every float16 decodes to its value', () => {
    const out = new Float32Array(65536);
    decodeFloat16(ALL_HALVES, out);
    const wrong = [...ALL_HALVES].filter((h) => !Object.is(out[h], float16Value(h)));
    expect(wrong).toEqual([]);
  });

  it('half precision - every bfloat16 decodes to its value', () => {
    const out = new Float32Array(65536);
    decodeBfloat16(ALL_HALVES, out);
    const wrong = [...ALL_HALVES].filter((h) => !Object.is(out[h], bfloat16Value(h)));
    expect(wrong).toEqual([]);
  });

  it('half precision - every value that is not a NaN survives encode(decode(h)) in both formats', () => {
    for (const [encode, decode, value] of [
      [encodeFloat16, decodeFloat16, float16Value],
      [encodeBfloat16, decodeBfloat16, bfloat16Value],
    ] as const) {
      const decoded = new Float32Array(65536);
      decode(ALL_HALVES, decoded);
      const back = encoded(encode, decoded);
      const wrong = [...ALL_HALVES].filter((h) => !Number.isNaN(value(h)) && back[h] !== h);
      expect(wrong).toEqual([]);
      // A NaN pattern comes back as a NaN of the same sign.
      const nans = [...ALL_HALVES].filter((h) => Number.isNaN(value(h)));
      expect(nans.every((h) => Number.isNaN(value(back[h])) && (back[h] & 0x8000) === (h & 0x8000))).toBe(true);
    }
  });

  it('half precision - float16 encoding rounds to nearest even at every tie and beside it', () => {
    expectEncodings(encodeFloat16, referenceFloat16, float16Value, midpoints(FLOAT16_VALUES));
  });

  it('half precision - bfloat16 encoding rounds to nearest even at every tie and beside it', () => {
    expectEncodings(encodeBfloat16, referenceBfloat16, bfloat16Value, midpoints(BFLOAT16_VALUES));
  });

  it('half precision - edge cases: overflow, infinities, NaNs, subnormals of both widths, zeros', () => {
    const nans = new Float32Array(NAN_BITS.buffer);
    const inputs = Float32Array.from([...EDGE_CASES, ...EDGE_CASES.map((x) => -x), ...nans]);
    expectEncodings(encodeFloat16, referenceFloat16, float16Value, inputs);
    expectEncodings(encodeBfloat16, referenceBfloat16, bfloat16Value, inputs);
    const f16 = encoded(encodeFloat16, Float32Array.of(65519, 65520, 2 ** -25, 3 * 2 ** -25, -0, NaN));
    expect([...f16]).toEqual([0x7bff, 0x7c00, 0x0000, 0x0002, 0x8000, 0x7e00]);
    const bf16 = encoded(encodeBfloat16, Float32Array.of(3.4028234663852886e38, 1, -Infinity));
    expect([...bf16]).toEqual([0x7f80, 0x3f80, 0xff80]);
  });

  it('half precision - random float32 values encode as the reference rounds them', () => {
    fc.assert(
      fc.property(fc.array(fc.float(), { minLength: 1, maxLength: 200 }), (values) => {
        const inputs = Float32Array.from(values);
        expectEncodings(encodeFloat16, referenceFloat16, float16Value, inputs);
        expectEncodings(encodeBfloat16, referenceBfloat16, bfloat16Value, inputs);
      }),
    );
    // Random bit patterns reach every exponent evenly, subnormals and NaN payloads included.
    fc.assert(
      fc.property(fc.array(fc.nat({ max: 0xffffffff }), { minLength: 1, maxLength: 200 }), (bits) => {
        const inputs = new Float32Array(Uint32Array.from(bits).buffer);
        expectEncodings(encodeFloat16, referenceFloat16, float16Value, inputs);
        expectEncodings(encodeBfloat16, referenceBfloat16, bfloat16Value, inputs);
      }),
    );
  });

  it('half precision - arrays of different lengths are refused', () => {
    expect(() => encodeFloat16(new Float32Array(3), new Uint16Array(2))).toThrow(/3 values into an array of 2/);
    expect(() => decodeBfloat16(new Uint16Array(1), new Float32Array(4))).toThrow(RangeError);
  });
});
