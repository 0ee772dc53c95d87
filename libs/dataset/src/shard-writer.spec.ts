import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { Compressor, loadIndex, scanRecords } from '#libs/recordio';
import { InvalidConvertOptionError } from './errors.js';
import { ShardedRecordWriter, shardPath } from './shard-writer.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tributary-shards-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

let runCounter = 0;

test('sharding - every shard but the last holds exactly chunksPerFile chunks, and records keep their order', async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(fc.integer({ min: 0, max: 40 }), { maxLength: 60 }),
      fc.integer({ min: 1, max: 50 }),
      fc.integer({ min: 1, max: 4 }),
      fc.constantFrom(Compressor.None, Compressor.Snappy, Compressor.Gzip),
      async (sizes, maxChunkSizeBytes, chunksPerFile, compressor) => {
        const outPrefix = join(dir, `run${runCounter++}`, 'part');
        const records = sizes.map((size, i) => new Uint8Array(size).fill(i % 256));
        const writer = new ShardedRecordWriter({ outPrefix, maxChunkSizeBytes, chunksPerFile, compressor });
        for (const record of records) await writer.write(record);
        const summary = await writer.close();

        expect(summary.records).toBe(records.length);
        expect(summary.files).toEqual(summary.files.map((_, i) => shardPath(outPrefix, i)));
        const chunkCounts: number[] = [];
        const readBack: Uint8Array[] = [];
        for (const file of summary.files) {
          const index = await loadIndex(file);
          chunkCounts.push(index.totalChunks);
          for await (const record of scanRecords(file)) readBack.push(record);
        }
        expect(chunkCounts.slice(0, -1).every((n) => n === chunksPerFile)).toBe(true);
        if (chunkCounts.length > 0) expect(chunkCounts.at(-1)!).toBeGreaterThanOrEqual(1);
        if (chunkCounts.length > 0) expect(chunkCounts.at(-1)!).toBeLessThanOrEqual(chunksPerFile);
        expect(chunkCounts.reduce((a, b) => a + b, 0)).toBe(summary.chunks);
        expect(readBack.map((r) => Buffer.from(r).toString('hex'))).toEqual(
          records.map((r) => Buffer.from(r).toString('hex')),
        );
      },
    ),
    { numRuns: 60 },
  );
});

test('sharding - Fashion-MNIST-sized records give 1,000 records a chunk and 8 chunks a file', async () => {
  const outPrefix = join(dir, 'mnist-like', 'train');
  const writer = new ShardedRecordWriter({
    outPrefix,
    maxChunkSizeBytes: 800_000,
    chunksPerFile: 8,
    compressor: Compressor.None,
  });
  const record = new Uint8Array(800);
  for (let i = 0; i < 20_500; i++) await writer.write(record);
  const summary = await writer.close();
  expect(summary.chunks).toBe(21);
  expect(summary.files.length).toBe(3);
  const indexes = await Promise.all(summary.files.map((f) => loadIndex(f)));
  expect(indexes.map((i) => i.totalChunks)).toEqual([8, 8, 5]);
  expect(indexes.flatMap((i) => i.chunks.map((c) => c.numRecords))).toEqual([...Array<number>(20).fill(1000), 500]);
});

test('sharding - shards left by an earlier conversion to the same prefix are removed', async () => {
  const sub = join(dir, 'rewrite');
  const outPrefix = join(sub, 'data');
  const write = async (n: number): Promise<void> => {
    const writer = new ShardedRecordWriter({
      outPrefix,
      maxChunkSizeBytes: 1,
      chunksPerFile: 1,
      compressor: Compressor.None,
    });
    for (let i = 0; i < n; i++) await writer.write(Uint8Array.of(i));
    await writer.close();
  };
  await write(5);
  await writeFile(join(sub, 'data-notes.txt'), 'kept');
  await writeFile(join(sub, 'other-00009.recordio'), 'kept');
  await write(2);
  expect((await readdir(sub)).sort()).toEqual([
    'data-00000.recordio',
    'data-00001.recordio',
    'data-notes.txt',
    'other-00009.recordio',
  ]);
});

test('sharding - bad layout options are refused', () => {
  const base = { outPrefix: join(dir, 'x'), maxChunkSizeBytes: 10, chunksPerFile: 1, compressor: Compressor.None };
  expect(() => new ShardedRecordWriter({ ...base, maxChunkSizeBytes: 0 })).toThrow(InvalidConvertOptionError);
  expect(() => new ShardedRecordWriter({ ...base, chunksPerFile: 1.5 })).toThrow(/chunksPerFile/);
  expect(() => new ShardedRecordWriter({ ...base, outPrefix: '' })).toThrow(/outPrefix/);
});
