import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { indexFiles } from '#libs/recordio';
import { FASHION_MNIST_SOURCE_DIR } from './defaults.js';
import { MissingDatasetFileError } from './errors.js';
import { convertFashionMnist, FASHION_MNIST_FILES, type FashionMnistSplit } from './fashion-mnist.js';
import { readIdx } from './idx.js';
import { readIdxExamples } from './read-examples.js';

let outDir: string;
beforeAll(async () => {
  outDir = await mkdtemp(join(tmpdir(), 'tributary-fmnist-'));
});
afterAll(async () => {
  await rm(outDir, { recursive: true, force: true });
});

test('fashion-mnist - the converted records decode to exactly the IDX images and labels, in order', async () => {
  const lastProgress: Partial<Record<FashionMnistSplit, [number, number]>> = {};
  const summary = await convertFashionMnist({
    outDir,
    onProgress: (split, done, total) => {
      lastProgress[split] = [done, total];
    },
  });
  expect(summary.train.records).toBe(60_000);
  expect(summary.test.records).toBe(10_000);
  expect(summary.train.chunks).toBe(60);
  expect(summary.test.chunks).toBe(10);
  expect(summary.train.files.length).toBe(8);
  expect(summary.test.files.length).toBe(2);
  expect(lastProgress).toEqual({ train: [60_000, 60_000], test: [10_000, 10_000] });

  const expected = { train: { records: 60_000, chunks: 60 }, test: { records: 10_000, chunks: 10 } };
  for (const split of ['train', 'test'] as const) {
    const pattern = join(outDir, `${split}-*.recordio`);
    const index = await indexFiles([pattern]);
    expect(index.totalRecords).toBe(expected[split].records);
    expect(index.totalChunks).toBe(expected[split].chunks);
    expect(index.chunks.every((c) => c.numRecords === 1000 && c.compressor === 1)).toBe(true);

    const [images, labels, back] = await Promise.all([
      readIdx(join(FASHION_MNIST_SOURCE_DIR, FASHION_MNIST_FILES[split].images)),
      readIdx(join(FASHION_MNIST_SOURCE_DIR, FASHION_MNIST_FILES[split].labels)),
      readIdxExamples([pattern]),
    ]);
    expect(back.count).toBe(expected[split].records);
    expect(back.itemShape).toEqual([28, 28]);
    expect(back.featureDtype).toBe('uint8');
    expect(back.labelDtype).toBe('int32');
    expect(Buffer.from(back.features as Uint8Array).equals(Buffer.from(images.data as Uint8Array))).toBe(true);
    expect(Buffer.from(Int32Array.from(labels.data).buffer).equals(Buffer.from(back.labels.buffer))).toBe(true);
  }
});

test('fashion-mnist - a missing source file is named', async () => {
  await expect(convertFashionMnist({ sourceDir: outDir, outDir })).rejects.toThrow(MissingDatasetFileError);
  await expect(convertFashionMnist({ sourceDir: outDir, outDir })).rejects.toThrow(
    `dataset file ${join(outDir, 'train-images-idx3-ubyte.gz')} is missing`,
  );
});
