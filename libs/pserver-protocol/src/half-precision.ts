/**
 * Conversions between float32 and the two 16-bit float formats tensors may travel in: IEEE 754
 * half precision (float16) and bfloat16 (the upper half of a float32). Encoding rounds to
 * nearest, ties to even, as IEEE 754 does; values beyond a format's range become infinities, a
 * NaN stays a (quiet) NaN, and signs, zeros and subnormals are kept.
 *
 * These run on every push and pull, so they work on the bits through `Uint32Array` views, with
 * no allocation per element, no global lookups in their loops (slow in a vm context such as a
 * test runner's), and tables instead of branches: encoding float16 looks up how to treat the
 * sign and exponent, decoding it looks up the whole value.
 */

const FLOAT32_INFINITY_BITS = 0x7f800000;

/**
 * How float16 encoding treats each float32 sign and exponent (the top 9 bits): the float16 bits
 * the rounded mantissa is added to (sign, exponent, or infinity), how many bits of the mantissa
 * (with its leading one) are dropped, and the bias that rounds them to nearest even.
 */
interface Float16EncodeTables {
  base: Uint16Array;
  shift: Uint8Array;
  bias: Int32Array;
}

const FLOAT16_ENCODE = float16EncodeTables();

function float16EncodeTables(): Float16EncodeTables {
  const base = new Uint16Array(512);
  const shift = new Uint8Array(512);
  const bias = new Int32Array(512);
  for (let top = 0; top < 512; top++) {
    const exponent = top & 0xff;
    let s: number;
    let b: number;
    if (exponent >= 127 + 16) {
      // 65536 and beyond (infinities too): infinity, all mantissa bits dropped.
      s = 31;
      b = 0x7c00;
    } else if (exponent >= 127 - 14) {
      // A normal float16: the leading one (bit 23, 1 << 10 after the shift) adds the last 1 to
      // the exponent, and a rounding carry out of the mantissa moves into it, up to infinity.
      s = 13;
      b = (exponent - (127 - 14)) << 10;
    } else if (exponent >= 127 - 25) {
      // A float16 subnormal counts units of 2^-24: 14 to 24 bits dropped; one may round up to
      // the smallest normal.
      s = 126 - exponent;
      b = 0;
    } else {
      // Below 2^-26, under half the smallest subnormal: zero (a shift by 31 leaves nothing).
      s = 31;
      b = 0;
    }
    base[top] = ((top & 0x100) << 7) | b;
    shift[top] = s;
    bias[top] = (1 << (s - 1)) - 1;
  }
  return { base, shift, bias };
}

/** The float32 bits of every float16, indexed by its 16 bits. */
const FLOAT16_TO_FLOAT32_BITS = float16DecodeTable();

function float16DecodeTable(): Uint32Array {
  const table = new Uint32Array(65536);
  for (let h = 0; h < 65536; h++) {
    const sign = (h & 0x8000) << 16;
    const exponent = (h >>> 10) & 0x1f;
    const mantissa = h & 0x3ff;
    let bits: number;
    if (exponent === 0x1f) {
      bits = FLOAT32_INFINITY_BITS | (mantissa << 13);
    } else if (exponent !== 0) {
      bits = ((exponent + 127 - 15) << 23) | (mantissa << 13);
    } else if (mantissa === 0) {
      bits = 0;
    } else {
      // A subnormal float16 is a normal float32: shift the mantissa up to its leading one.
      let e = 127 - 15 + 1;
      let m = mantissa;
      while ((m & 0x400) === 0) {
        m <<= 1;
        e -= 1;
      }
      bits = (e << 23) | ((m & 0x3ff) << 13);
    }
    table[h] = (sign | bits) >>> 0;
  }
  return table;
}

/** The bits of a float32 array, without a copy (a `Float32Array` is always 4-byte aligned). */
function bitsOf(values: Float32Array): Uint32Array {
  return new Uint32Array(values.buffer, values.byteOffset, values.length);
}

function requireSameLength(from: ArrayLike<number>, to: ArrayLike<number>): void {
  if (from.length !== to.length) {
    throw new RangeError(`cannot convert ${from.length} values into an array of ${to.length}`);
  }
}

/** Writes `from` rounded to float16 (round to nearest even) into `to`, which has its length. */
export function encodeFloat16(from: Float32Array, to: Uint16Array): void {
  requireSameLength(from, to);
  const bits = bitsOf(from);
  const { base, shift, bias } = FLOAT16_ENCODE;
  const n = from.length;
  for (let i = 0; i < n; i++) {
    const u = bits[i];
    const top = u >>> 23;
    const mantissa = (u & 0x7fffff) | 0x800000;
    const s = shift[top];
    // Adding bias and the last kept bit carries into the kept bits exactly when the dropped
    // ones are above half, or at half with an odd last bit: round to nearest, ties to even.
    let h = base[top] + ((mantissa + bias[top] + ((mantissa >>> s) & 1)) >>> s);
    if ((u & 0x7fffffff) > FLOAT32_INFINITY_BITS) h = ((u >>> 16) & 0x8000) | 0x7e00;
    to[i] = h;
  }
}

/** Writes the float32 value of each float16 in `from` into `to`, which has its length. Exact. */
export function decodeFloat16(from: Uint16Array, to: Float32Array): void {
  requireSameLength(from, to);
  const bits = bitsOf(to);
  const table = FLOAT16_TO_FLOAT32_BITS;
  const n = from.length;
  for (let i = 0; i < n; i++) bits[i] = table[from[i]];
}

/** Writes `from` rounded to bfloat16 (round to nearest even) into `to`, which has its length. */
export function encodeBfloat16(from: Float32Array, to: Uint16Array): void {
  requireSameLength(from, to);
  const bits = bitsOf(from);
  const n = from.length;
  for (let i = 0; i < n; i++) {
    const u = bits[i];
    // A NaN keeps its sign and gets the quiet bit, so that dropping its low bits leaves a NaN;
    // any other value rounds (the sum stays below 2^32: only NaNs lie above -MAX_VALUE's bits).
    to[i] = (u & 0x7fffffff) > FLOAT32_INFINITY_BITS ? (u >>> 16) | 0x40 : (u + 0x7fff + ((u >>> 16) & 1)) >>> 16;
  }
}

/** Writes the float32 value of each bfloat16 in `from` into `to`, which has its length. Exact. */
export function decodeBfloat16(from: Uint16Array, to: Float32Array): void {
  requireSameLength(from, to);
  const bits = bitsOf(to);
  const n = from.length;
  for (let i = 0; i < n; i++) bits[i] = from[i] << 16;
}
