import { mkdtemp, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import { HEADER_SIZE_BYTES } from './chunk-header.js';
import { loadIndex } from './chunk-index.js';
import { readChunkAt } from './chunk-reader.js';
import { Compressor } from './compressor.js';
import { RangeReader } from './range-reader.js';
import { scanRecords } from './record-scanner.js';
import { RecordWriter } from './record-writer.js';

/** A record described by its length and content seed, so large records are cheap to generate. */
interface RecordSpec {
  readonly length: number;
  readonly seed: number;
  /** Number of distinct byte values: 2 and 16 compress well, 256 hardly at all. */
  readonly alphabet: number;
}

const recordSpec: fc.Arbitrary<RecordSpec> = fc.record({
  length: fc.oneof(
    { weight: 2, arbitrary: fc.constant(0) },
    { weight: 10, arbitrary: fc.nat(64) },
    { weight: 6, arbitrary: fc.nat(2000) },
    { weight: 1, arbitrary: fc.integer({ min: 60_000, max: 140_000 }) },
  ),
  seed: fc.nat(),
  alphabet: fc.constantFrom(2, 16, 256),
});

const chunkSize = fc.oneof(fc.constantFrom(0, 1, 10, 100, 1000, 4096, 65_536, 200_000), fc.nat(300_000));

const compressor = fc.constantFrom(Compressor.None, Compressor.Snappy, Compressor.Gzip);

function makeRecord({ length, seed, alphabet }: RecordSpec): Uint8Array {
  const out = new Uint8Array(length);
  let x = seed | 1;
  for (let i = 0; i < length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = (x >>> 0) % alphabet;
  }
  return out;
}

function sameRecords(actual: readonly Uint8Array[], expected: readonly Uint8Array[]): boolean {
  return actual.length === expected.length && actual.every((r, i) => Buffer.compare(r, expected[i]!) === 0);
}

async function collect(file: string): Promise<Uint8Array[]> {
  const records: Uint8Array[] = [];
  for await (const record of scanRecords(file)) records.push(record);
  return records;
}

describe('recordio round trip', () => {
  let dir: string;
  let counter = 0;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'recordio-round-trip-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  async function writeFile(
    records: readonly Uint8Array[],
    maxChunkSizeBytes: number,
    comp: Compressor,
  ): Promise<string> {
    const file = path.join(dir, `file-${counter++}.recordio`);
    const writer = await RecordWriter.open(file, { maxChunkSizeBytes, compressor: comp });
    for (const record of records) await writer.write(record);
    await writer.close();
    return file;
  }

  it('recordio round trip - every record comes back, chunks obey the size rule, totals match', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(recordSpec, { maxLength: 40 }), chunkSize, compressor, async (specs, max, comp) => {
        const records = specs.map(makeRecord);
        const file = await writeFile(records, max, comp);
        const index = await loadIndex(file);

        expect(index.totalRecords).toBe(records.length);
        expect(index.totalChunks).toBe(index.chunks.length);
        expect(index.fileSizeBytes).toBe((await stat(file)).size);
        let offset = 0;
        let first = 0;
        for (const chunk of index.chunks) {
          expect(chunk.offset).toBe(offset);
          expect(chunk.firstRecord).toBe(first);
          expect(chunk.compressor).toBe(comp);
          expect(chunk.numRecords).toBeGreaterThan(0);
          const bytes = records.slice(first, first + chunk.numRecords).reduce((sum, r) => sum + r.length, 0);
          // Only a record alone may exceed the limit, and a chunk ends only when the next record would overflow it.
          if (chunk.numRecords > 1) expect(bytes).toBeLessThanOrEqual(max);
          const next = records[first + chunk.numRecords];
          if (next !== undefined) expect(bytes + next.length).toBeGreaterThan(max);
          offset += HEADER_SIZE_BYTES + chunk.compressedSize;
          first += chunk.numRecords;
        }
        expect(offset).toBe(index.fileSizeBytes);

        expect(sameRecords(await collect(file), records)).toBe(true);
        for (const chunk of index.chunks) {
          const { records: got } = await readChunkAt(file, chunk.offset);
          expect(sameRecords(got, records.slice(chunk.firstRecord, chunk.firstRecord + chunk.numRecords))).toBe(true);
        }
      }),
      { numRuns: 120 },
    );
  });

  it('recordio round trip - range reads across chunk boundaries equal slices of the records', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          recordSpec.filter((s) => s.length < 5000),
          { minLength: 1, maxLength: 60 },
        ),
        fc.constantFrom(0, 7, 50, 500, 3000),
        compressor,
        fc.array(fc.tuple(fc.nat(), fc.nat()), { minLength: 1, maxLength: 8 }),
        async (specs, max, comp, ranges) => {
          const records = specs.map(makeRecord);
          const file = await writeFile(records, max, comp);
          const reader = await RangeReader.open(file);
          try {
            for (const [a, b] of ranges) {
              const start = a % (records.length + 1);
              const end = start + (b % (records.length - start + 1));
              expect(sameRecords(await reader.read(start, end), records.slice(start, end))).toBe(true);
            }
            expect(sameRecords(await reader.read(0, records.length), records)).toBe(true);
          } finally {
            await reader.close();
          }
        },
      ),
      { numRuns: 60 },
    );
  });

  it('recordio round trip - a range outside the file is refused', async () => {
    const file = await writeFile([new Uint8Array(3), new Uint8Array(4)], 4, Compressor.None);
    const reader = await RangeReader.open(file);
    try {
      await expect(reader.read(1, 3)).rejects.toThrow(RangeError);
      await expect(reader.read(2, 1)).rejects.toThrow(RangeError);
      await expect(reader.read(-1, 1)).rejects.toThrow(RangeError);
      expect(await reader.read(2, 2)).toEqual([]);
    } finally {
      await reader.close();
    }
  });

  it('recordio round trip - a file with no records is empty and has no chunks', async () => {
    const file = await writeFile([], 10, Compressor.Snappy);
    expect((await stat(file)).size).toBe(0);
    const index = await loadIndex(file);
    expect(index).toMatchObject({ totalChunks: 0, totalRecords: 0, fileSizeBytes: 0 });
    expect(await collect(file)).toEqual([]);
  });
});
