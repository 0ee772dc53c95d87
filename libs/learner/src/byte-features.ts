import { compileKernelModule, plainKernelsForced, WasmKernelUnavailableError, WASM_PAGE_BYTES } from '#libs/wasm-simd';

/** The module of the conversion (`kernels/byte-features.wat`). */
const BYTE_FEATURES_MODULE = new URL('./kernels/byte-features.wasm', import.meta.url);

/** Which code converts uint8 features to float32: our SIMD128 kernel, or plain JavaScript. */
export type ByteConversionKernel = 'wasm-simd' | 'js';

/**
 * Converts uint8 features, laid end to end, to float32 and multiplies them by a scale:
 * `out[i] = bytes[i] * scale` for `i < n`, rounded to float32 as JavaScript's
 * `float32Array[i] *= scale` rounds it, so every implementation gives the same values to the bit.
 */
export interface ByteConversion {
  readonly kernel: ByteConversionKernel;
  convert(bytes: Uint8Array, out: Float32Array, n: number, scale: number): void;
}

/**
 * Multiplies `count` elements of `values` from `at` by `scale`. Kept apart so that V8 optimises
 * the loop on its own.
 */
export function scaleInPlace(values: Float32Array, at: number, count: number, scale: number): void {
  for (let i = at, end = at + count; i < end; i++) values[i]! *= scale;
}

/** Converted by `set`, then scaled, in one pass each over the whole run. */
class PlainByteConversion implements ByteConversion {
  readonly kernel = 'js';

  convert(bytes: Uint8Array, out: Float32Array, n: number, scale: number): void {
    out.set(bytes.subarray(0, n));
    if (scale !== 1) scaleInPlace(out, 0, n, scale);
  }
}

/**
 * The SIMD128 kernel, on a memory of its own: the bytes are copied in, converted, and the floats
 * copied out (the learner runs the same kernel on the wasm backend's memory, straight into a
 * minibatch's input tensor: see `Batch.featureBytes`). A minibatch of the example's 64 images took 0.30 µs an image here against 0.59 for
 * the plain conversion, and the copies in and out 0.08 of those 0.30.
 */
class SimdByteConversion implements ByteConversion {
  readonly kernel = 'wasm-simd';
  /** The bytes in, as many as the memory has room for now (and as many floats out). */
  private input!: Uint8Array;
  private output!: Float32Array;

  constructor(
    private readonly memory: WebAssembly.Memory,
    private readonly entry: (bytes: number, out: number, n: number, scale: number) => void,
  ) {
    this.fit(0);
  }

  convert(bytes: Uint8Array, out: Float32Array, n: number, scale: number): void {
    if (n > this.input.length && !this.fit(n)) {
      plain.convert(bytes, out, n, scale);
      return;
    }
    this.input.set(bytes.subarray(0, n));
    this.entry(this.input.byteOffset, this.output.byteOffset, n, scale);
    out.set(this.output.subarray(0, n));
  }

  /**
   * Makes room for `n` elements, the floats after the bytes (16-byte aligned), growing the
   * memory where needed, and views them; false when the memory cannot grow that far.
   */
  private fit(n: number): boolean {
    const floatsAt = Math.ceil(n / 16) * 16;
    const missing = floatsAt + 4 * n - this.memory.buffer.byteLength;
    try {
      if (missing > 0) this.memory.grow(Math.ceil(missing / WASM_PAGE_BYTES));
    } catch (err) {
      if (err instanceof RangeError) return false;
      throw err;
    }
    this.input = new Uint8Array(this.memory.buffer, 0, n);
    this.output = new Float32Array(this.memory.buffer, floatsAt, n);
    return true;
  }
}

const plain = new PlainByteConversion();

let simd: ByteConversion | undefined | null;

/**
 * The conversion this process uses: the SIMD128 kernel where it loads, unless
 * `TRIBUTARY_KERNELS=js` asks for plain JavaScript (`env`); plain JavaScript otherwise. Loaded
 * once per thread.
 */
export function byteConversion(env: NodeJS.ProcessEnv = process.env): ByteConversion {
  if (plainKernelsForced(env)) return plain;
  if (simd === undefined) {
    try {
      const memory = new WebAssembly.Memory({ initial: 1 });
      const instance = new WebAssembly.Instance(compileKernelModule(BYTE_FEATURES_MODULE), { env: { memory } });
      const { bytes_to_f32: entry } = instance.exports as {
        bytes_to_f32: (bytes: number, out: number, n: number, scale: number) => void;
      };
      simd = new SimdByteConversion(memory, entry);
    } catch (err) {
      if (!(err instanceof WasmKernelUnavailableError)) throw err;
      simd = null;
    }
  }
  return simd ?? plain;
}

/** The plain JavaScript conversion, whatever the process uses (tests hold the kernel to it). */
export function plainByteConversion(): ByteConversion {
  return plain;
}
