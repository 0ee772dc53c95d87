import { join } from 'node:path';
import type { Compressor } from '#libs/recordio';
import { convertIdx } from './convert-idx.js';
import {
  CHUNKS_PER_FILE,
  DATASET_COMPRESSOR,
  FASHION_MNIST_MAX_CHUNK_SIZE_BYTES,
  FASHION_MNIST_SOURCE_DIR,
} from './defaults.js';
import { requireFiles } from './source-file.js';
import type { ConversionSummary } from './shard-writer.js';

/** The two splits of Fashion-MNIST. */
export type FashionMnistSplit = 'train' | 'test';

/** Options of {@link convertFashionMnist}. */
export interface ConvertFashionMnistOptions {
  /** Directory holding the four IDX `.gz` files; defaults to {@link FASHION_MNIST_SOURCE_DIR}. */
  readonly sourceDir?: string;
  /** Receives `train-00000.recordio`, ... and `test-00000.recordio`, ... */
  readonly outDir: string;
  /** Defaults to {@link FASHION_MNIST_MAX_CHUNK_SIZE_BYTES} (1,000 records a chunk). */
  readonly maxChunkSizeBytes?: number;
  /** Defaults to {@link CHUNKS_PER_FILE}. */
  readonly chunksPerFile?: number;
  /** Defaults to {@link DATASET_COMPRESSOR} (snappy). */
  readonly compressor?: Compressor;
  /** Progress of each split in turn. */
  readonly onProgress?: (split: FashionMnistSplit, recordsDone: number, total: number) => void;
}

/** What {@link convertFashionMnist} wrote for each split. */
export interface FashionMnistSummary {
  readonly train: ConversionSummary;
  readonly test: ConversionSummary;
}

/** IDX file names of each split, as distributed. */
export const FASHION_MNIST_FILES: Readonly<Record<FashionMnistSplit, { images: string; labels: string }>> = {
  train: { images: 'train-images-idx3-ubyte.gz', labels: 'train-labels-idx1-ubyte.gz' },
  test: { images: 't10k-images-idx3-ubyte.gz', labels: 't10k-labels-idx1-ubyte.gz' },
};

/**
 * Converts Fashion-MNIST (60,000 training and 10,000 test images of 28x28 uint8 pixels, int32
 * labels 0-9) into `outDir/train-NNNNN.recordio` and `outDir/test-NNNNN.recordio`.
 * @throws MissingDatasetFileError when a source file is missing, naming it.
 */
export async function convertFashionMnist(options: ConvertFashionMnistOptions): Promise<FashionMnistSummary> {
  const sourceDir = options.sourceDir ?? FASHION_MNIST_SOURCE_DIR;
  await requireFiles(
    ...(['train', 'test'] as const).flatMap((split) =>
      Object.values(FASHION_MNIST_FILES[split]).map((name) => join(sourceDir, name)),
    ),
  );
  const convertSplit = (split: FashionMnistSplit): Promise<ConversionSummary> =>
    convertIdx({
      images: join(sourceDir, FASHION_MNIST_FILES[split].images),
      labels: join(sourceDir, FASHION_MNIST_FILES[split].labels),
      outPrefix: join(options.outDir, split),
      maxChunkSizeBytes: options.maxChunkSizeBytes ?? FASHION_MNIST_MAX_CHUNK_SIZE_BYTES,
      chunksPerFile: options.chunksPerFile ?? CHUNKS_PER_FILE,
      compressor: options.compressor ?? DATASET_COMPRESSOR,
      onProgress: options.onProgress && ((done, total) => options.onProgress!(split, done, total)),
    });
  const train = await convertSplit('train');
  const test = await convertSplit('test');
  return { train, test };
}
