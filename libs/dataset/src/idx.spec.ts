import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import fc from 'fast-check';
import { IdxFormatError } from './errors.js';
import { encodeIdx, IdxDecoder, type IdxDataType, readIdx } from './idx.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tributary-idx-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

let fileCounter = 0;
async function writeTemp(bytes: Uint8Array, gzip: boolean): Promise<string> {
  const file = join(dir, `f${fileCounter++}${gzip ? '.gz' : ''}`);
  await writeFile(file, gzip ? gzipSync(bytes) : bytes);
  return file;
}

const SAMPLES: Record<IdxDataType, { values: number[]; typed: new (values: number[]) => ArrayLike<number> }> = {
  ubyte: { values: [0, 1, 127, 128, 255, 42], typed: Uint8Array },
  byte: { values: [-128, -1, 0, 1, 127, 5], typed: Int8Array },
  short: { values: [-32768, -2, 0, 258, 32767, 1000], typed: Int16Array },
  int: { values: [-2147483648, -70000, 0, 65536, 2147483647, 7], typed: Int32Array },
  float: { values: [-1.5, 0, 3.25, 1e-3, 65504, -0.125], typed: Float32Array },
  double: { values: [-1.5, 0, Math.PI, 1e-300, 1e300, -0.1], typed: Float64Array },
};

for (const gzip of [false, true]) {
  for (const [dataType, sample] of Object.entries(SAMPLES) as [IdxDataType, (typeof SAMPLES)[IdxDataType]][]) {
    test(`idx - reads ${dataType} elements${gzip ? ' from a gzipped file' : ''}`, async () => {
      const file = await writeTemp(encodeIdx(dataType, [2, 3], sample.values), gzip);
      const idx = await readIdx(file);
      expect(idx.dataType).toBe(dataType);
      expect(idx.dims).toEqual([2, 3]);
      expect(idx.data).toBeInstanceOf(sample.typed);
      expect(Array.from(idx.data)).toEqual(Array.from(new sample.typed(sample.values)));
    });
  }
}

test('idx - ubyte files of any shape read back as written, gzipped or not', async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(fc.integer({ min: 0, max: 6 }), { minLength: 1, maxLength: 4 }).chain((dims) => {
        const n = dims.reduce((a, d) => a * d, 1);
        return fc.tuple(fc.constant(dims), fc.uint8Array({ minLength: n, maxLength: n }), fc.boolean());
      }),
      async ([dims, data, gzip]) => {
        const idx = await readIdx(await writeTemp(encodeIdx('ubyte', dims, data), gzip));
        expect(idx.dims).toEqual(dims);
        expect(Buffer.from(idx.data as Uint8Array).equals(Buffer.from(data))).toBe(true);
      },
    ),
    { numRuns: 40 },
  );
});

test('idx - bytes arriving one at a time decode the same, header included', () => {
  const bytes = encodeIdx('short', [3, 2], [1, -2, 300, -400, 5, 6]);
  const decoder = new IdxDecoder('pieces');
  for (const byte of bytes) decoder.push(Buffer.of(byte));
  const idx = decoder.finish();
  expect(idx.dims).toEqual([3, 2]);
  expect(Array.from(idx.data)).toEqual([1, -2, 300, -400, 5, 6]);
});

test('idx - a large gzipped file arriving in many pieces is read whole', async () => {
  const data = new Uint8Array(300 * 28 * 28).map((_, i) => (i * 7) % 256);
  const idx = await readIdx(await writeTemp(encodeIdx('ubyte', [300, 28, 28], data), true));
  expect(Buffer.from(idx.data as Uint8Array).equals(Buffer.from(data))).toBe(true);
});

async function expectIdxError(bytes: Uint8Array, gzip: boolean, message: RegExp): Promise<void> {
  const file = await writeTemp(bytes, gzip);
  const failure = readIdx(file);
  await expect(failure).rejects.toThrow(IdxFormatError);
  await expect(readIdx(file)).rejects.toThrow(message);
  await expect(readIdx(file)).rejects.toThrow(file);
}

test('idx - a bad magic number is refused naming the file', async () => {
  const bytes = encodeIdx('ubyte', [2], [1, 2]);
  bytes[0] = 1;
  await expectIdxError(bytes, false, /bad magic number 01000801/);
});

test('idx - an unknown data type is refused', async () => {
  const bytes = encodeIdx('ubyte', [2], [1, 2]);
  bytes[2] = 0x0a;
  await expectIdxError(bytes, true, /unknown data type 0x0a/);
});

test('idx - truncated data is refused with the expected and found sizes', async () => {
  const bytes = encodeIdx('int', [2, 2], [1, 2, 3, 4]);
  await expectIdxError(
    bytes.subarray(0, bytes.length - 3),
    false,
    /truncated data: expected 16 bytes for dims \[2, 2\] got 13/,
  );
  await expectIdxError(bytes.subarray(0, bytes.length - 3), true, /truncated data/);
});

test('idx - a truncated header is refused', async () => {
  await expectIdxError(encodeIdx('ubyte', [2, 2], [1, 2, 3, 4]).subarray(0, 9), false, /truncated header/);
  await expectIdxError(new Uint8Array(0), false, /truncated header/);
});

test('idx - trailing bytes are refused', async () => {
  const bytes = encodeIdx('ubyte', [2], [1, 2]);
  const longer = new Uint8Array(bytes.length + 1);
  longer.set(bytes);
  await expectIdxError(longer, false, /trailing data/);
});

test('idx - rank 0 is refused', async () => {
  await expectIdxError(Uint8Array.of(0, 0, 8, 0), false, /rank 0/);
});

test('idx - corrupt gzip data is refused as an IDX error', async () => {
  const gz = gzipSync(encodeIdx('ubyte', [100], new Uint8Array(100).fill(3)));
  const file = join(dir, 'corrupt.gz');
  await writeFile(file, gz.subarray(0, gz.length - 10));
  await expect(readIdx(file)).rejects.toThrow(IdxFormatError);
  await expect(readIdx(file)).rejects.toThrow(/corrupt gzip data/);
});

test('idx - a missing file is reported by the file system error', async () => {
  await expect(readIdx(join(dir, 'absent'))).rejects.toThrow(/ENOENT/);
});
