import fc from 'fast-check';
import { FeatureWriter } from './batch.js';
import { byteConversion, plainByteConversion } from './byte-features.js';
import { wasmSimdSupported } from '#libs/wasm-simd';

/** What JavaScript gives for `float32Array[i] = bytes[i]; float32Array[i] *= scale`. */
function reference(bytes: Uint8Array, scale: number): Float32Array {
  const out = new Float32Array(bytes.length);
  for (let i = 0; i < bytes.length; i++) {
    out[i] = bytes[i]!;
    out[i]! *= scale;
  }
  return out;
}

/** Scales as layouts give them: 1/255, 1, and any finite double, tiny to huge. */
const scale = fc.oneof(
  fc.constantFrom(1, 1 / 255, 0.5, 1 / 3),
  fc.double({ noNaN: true, noDefaultInfinity: true, min: -1e30, max: 1e30 }),
  fc.double({ noNaN: true, min: 1e-40, max: 1e-30 }),
);

describe('byte features', () => {
  it('byte features - this runtime takes the SIMD128 kernel unless TRIBUTARY_KERNELS=js asks for plain JavaScript', () => {
    expect(byteConversion().kernel).toBe(wasmSimdSupported() ? 'wasm-simd' : 'js');
    expect(byteConversion({ TRIBUTARY_KERNELS: 'js' }).kernel).toBe('js');
  });

  it('byte features - the kernel and plain JavaScript give the values of float32 arithmetic in JavaScript, to the bit, over random bytes, lengths and scales', () => {
    const conversions = [byteConversion(), plainByteConversion()];
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 0, maxLength: 300 }), scale, fc.nat(7), (bytes, s, spare) => {
        const expected = reference(bytes, s);
        for (const conversion of conversions) {
          // The output may be longer than the run converted; what lies past it stays untouched.
          const out = new Float32Array(bytes.length + spare).fill(-7);
          conversion.convert(bytes, out, bytes.length, s);
          for (let i = 0; i < bytes.length; i++) {
            if (!Object.is(out[i], expected[i])) {
              throw new Error(
                `${conversion.kernel}: element ${i} (${bytes[i]} x ${s}) gave ${out[i]}, not ${expected[i]}`,
              );
            }
          }
          for (let i = bytes.length; i < out.length; i++) expect(out[i]).toBe(-7);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('byte features - a run longer than any before grows the kernel memory, and shorter ones after it still convert', () => {
    const conversion = byteConversion();
    for (const n of [10, 70_000, 3, 300_001, 17]) {
      const bytes = new Uint8Array(n).map((_, i) => (i * 131 + 7) & 255);
      const out = new Float32Array(n);
      conversion.convert(bytes, out, n, 1 / 255);
      const expected = reference(bytes, 1 / 255);
      expect(out.every((v, i) => v === expected[i])).toBe(true);
    }
  });

  it('byte features - a writer gathers uint8 examples and converts them as it writes them one by one; float32 features are not gathered', () => {
    const layout = { featureShape: [5], featureDtype: 'uint8' as const, scale: 1 / 255, labelDtype: 'int32' as const };
    const writer = new FeatureWriter(layout);
    expect(writer.gathersBytes).toBe(true);
    const source = new Uint8Array(40).map((_, i) => (i * 37) & 255);
    const oneByOne = new Float32Array(15);
    for (let k = 0; k < 3; k++) writer.write(oneByOne, k, source, 3 + 11 * k);
    const gathered = new Uint8Array(15);
    for (let k = 0; k < 3; k++) gathered.set(source.subarray(3 + 11 * k, 8 + 11 * k), 5 * k);
    const whole = new Float32Array(15);
    writer.writeGathered(whole, gathered, 3);
    expect(whole).toEqual(oneByOne);

    const floats = new FeatureWriter({ ...layout, featureDtype: 'float32' });
    expect(floats.gathersBytes).toBe(false);
    expect(() => floats.writeGathered(whole, gathered, 3)).toThrow(RangeError);
  });
});
