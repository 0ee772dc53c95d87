import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { Compressor, loadIndex } from '#libs/recordio';
import { convertIdx } from './convert-idx.js';
import { DatasetMismatchError, IdxFormatError, MissingDatasetFileError } from './errors.js';
import { encodeIdx } from './idx.js';
import { readExamples, readIdxExamples } from './read-examples.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tributary-convert-idx-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function writeIdx(name: string, bytes: Uint8Array, gzip = false): Promise<string> {
  const file = join(dir, name);
  await writeFile(file, gzip ? gzipSync(bytes) : bytes);
  return file;
}

test('convert idx - uint8 items and labels come back byte for byte, in order, across shards', async () => {
  const count = 250;
  const pixels = new Uint8Array(count * 4 * 3).map((_, i) => (i * 31) % 256);
  const labelValues = Array.from({ length: count }, (_, i) => i % 10);
  const images = await writeIdx('images.gz', encodeIdx('ubyte', [count, 4, 3], pixels), true);
  const labels = await writeIdx('labels', encodeIdx('ubyte', [count], labelValues));
  const progress: [number, number][] = [];
  // Each record is 4 + 8 + 12 + 4 = 28 bytes: 10 records a 280-byte chunk, 25 chunks, 3 a file.
  const summary = await convertIdx({
    images,
    labels,
    outPrefix: join(dir, 'out', 'small'),
    maxChunkSizeBytes: 280,
    chunksPerFile: 3,
    compressor: Compressor.Gzip,
    onProgress: (done, total) => progress.push([done, total]),
  });
  expect(summary.records).toBe(count);
  expect(summary.chunks).toBe(25);
  expect(summary.files.length).toBe(9);
  expect((await loadIndex(summary.files[0]!)).chunks.map((c) => c.numRecords)).toEqual([10, 10, 10]);
  expect(progress.at(-1)).toEqual([count, count]);

  const back = await readIdxExamples([join(dir, 'out', 'small-*.recordio')]);
  expect(back.count).toBe(count);
  expect(back.itemShape).toEqual([4, 3]);
  expect(back.featureDtype).toBe('uint8');
  expect(back.labelDtype).toBe('int32');
  expect(Buffer.from(back.features as Uint8Array).equals(Buffer.from(pixels))).toBe(true);
  expect(Array.from(back.labels)).toEqual(labelValues);
});

test('convert idx - float items become float32 features and float labels float32 labels', async () => {
  const images = await writeIdx('fimages', encodeIdx('double', [2, 2], [0.5, -1, 2, 3.5]));
  const labels = await writeIdx('flabels', encodeIdx('float', [2], [0.25, 9]));
  const summary = await convertIdx({ images, labels, outPrefix: join(dir, 'out', 'float') });
  expect(summary.records).toBe(2);
  const examples = [];
  for await (const e of readExamples(summary.files)) examples.push(e);
  expect(examples.map((e) => [e.featureDtype, Array.from(e.features), e.shape, e.labelDtype, e.label])).toEqual([
    ['float32', [0.5, -1], [2], 'float32', 0.25],
    ['float32', [2, 3.5], [2], 'float32', 9],
  ]);
  expect(examples[1]!.recordIndex).toBe(1);
});

test('convert idx - item and label counts must match', async () => {
  const images = await writeIdx('mm-images', encodeIdx('ubyte', [3, 2], [1, 2, 3, 4, 5, 6]));
  const labels = await writeIdx('mm-labels', encodeIdx('ubyte', [2], [0, 1]));
  const run = convertIdx({ images, labels, outPrefix: join(dir, 'out', 'mismatch') });
  await expect(run).rejects.toThrow(DatasetMismatchError);
  await expect(convertIdx({ images, labels, outPrefix: join(dir, 'out', 'mismatch') })).rejects.toThrow(
    /holds 3 items but .*mm-labels holds 2 labels/,
  );
});

test('convert idx - labels must be one-dimensional', async () => {
  const images = await writeIdx('2d-images', encodeIdx('ubyte', [2, 1], [1, 2]));
  const labels = await writeIdx('2d-labels', encodeIdx('ubyte', [2, 1], [0, 1]));
  await expect(convertIdx({ images, labels, outPrefix: join(dir, 'out', 'twod') })).rejects.toThrow(IdxFormatError);
});

test('convert idx - a missing input file is named before any work starts', async () => {
  const labels = await writeIdx('present-labels', encodeIdx('ubyte', [1], [0]));
  await expect(
    convertIdx({ images: join(dir, 'absent'), labels, outPrefix: join(dir, 'out', 'absent') }),
  ).rejects.toThrow(`dataset file ${join(dir, 'absent')} is missing`);
  await expect(
    convertIdx({ images: labels, labels: join(dir, 'absent-labels'), outPrefix: join(dir, 'out', 'absent') }),
  ).rejects.toThrow(MissingDatasetFileError);
});
