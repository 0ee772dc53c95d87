import type { Compressor } from '#libs/recordio';
import { CHUNKS_PER_FILE, DATASET_COMPRESSOR, DATASET_MAX_CHUNK_SIZE_BYTES } from './defaults.js';
import { DatasetMismatchError, IdxFormatError } from './errors.js';
import { encodeExample, type LabelDtype } from './example-record.js';
import { type IdxArray, readIdx } from './idx.js';
import { requireFiles } from './source-file.js';
import { type ProgressCallback, progressTicker } from './progress.js';
import { type ConversionSummary, ShardedRecordWriter, validateShardOptions } from './shard-writer.js';

/** Options of {@link convertIdx}. */
export interface ConvertIdxOptions {
  /** IDX file of the items (first dimension: item count); gzipped or not. */
  readonly images: string;
  /** IDX file of the labels, one dimension, as many as there are items. */
  readonly labels: string;
  /** Shards are written as `<outPrefix>-00000.recordio`, ... */
  readonly outPrefix: string;
  /** Defaults to {@link DATASET_MAX_CHUNK_SIZE_BYTES}. */
  readonly maxChunkSizeBytes?: number;
  /** Defaults to {@link CHUNKS_PER_FILE}. */
  readonly chunksPerFile?: number;
  /** Defaults to {@link DATASET_COMPRESSOR} (snappy). */
  readonly compressor?: Compressor;
  readonly onProgress?: ProgressCallback;
}

const INTEGER_IDX_TYPES = new Set(['ubyte', 'byte', 'short', 'int']);

/**
 * Converts an IDX pair (items and labels) into RecordIO shards, one example record per item, in
 * file order. `ubyte` items stay uint8; other item types become float32. The feature shape is
 * the item dims (e.g. `[28, 28]`). Integer labels are stored as int32, float labels as float32.
 * @throws DatasetMismatchError when the item and label counts differ.
 * @throws MissingDatasetFileError when an input file cannot be read.
 * @throws IdxFormatError when a file is malformed or the labels are not one-dimensional.
 */
export async function convertIdx(options: ConvertIdxOptions): Promise<ConversionSummary> {
  const shardOptions = {
    outPrefix: options.outPrefix,
    maxChunkSizeBytes: options.maxChunkSizeBytes ?? DATASET_MAX_CHUNK_SIZE_BYTES,
    chunksPerFile: options.chunksPerFile ?? CHUNKS_PER_FILE,
    compressor: options.compressor ?? DATASET_COMPRESSOR,
  };
  validateShardOptions(shardOptions);
  await requireFiles(options.images, options.labels);
  const [images, labels] = await Promise.all([readIdx(options.images), readIdx(options.labels)]);
  if (labels.dims.length !== 1) {
    throw new IdxFormatError(labels.file, `labels must have one dimension, got dims [${labels.dims.join(', ')}]`);
  }
  const count = images.dims[0]!;
  if (labels.dims[0] !== count) {
    throw new DatasetMismatchError(
      `${images.file} holds ${count} items but ${labels.file} holds ${labels.dims[0]} labels`,
    );
  }
  const writer = new ShardedRecordWriter(shardOptions);
  const tick = progressTicker(count, options.onProgress);
  const itemShape = images.dims.slice(1);
  const itemSize = itemShape.reduce((n, d) => n * d, 1);
  const itemFeatures = featureReader(images);
  const labelDtype: LabelDtype = INTEGER_IDX_TYPES.has(labels.dataType) ? 'int32' : 'float32';
  for (let i = 0; i < count; i++) {
    const record = encodeExample({
      features: itemFeatures(i * itemSize, (i + 1) * itemSize),
      shape: itemShape,
      labelDtype,
      label: labels.data[i]!,
    });
    await writer.write(record);
    tick(i + 1);
  }
  return writer.close();
}

/** Returns a function giving the features of items `[start, end)` of the IDX data, uint8 or float32. */
function featureReader(images: IdxArray): (start: number, end: number) => Uint8Array | Float32Array {
  const data = images.data;
  if (data instanceof Uint8Array) return (start, end) => data.subarray(start, end);
  return (start, end) => Float32Array.from(data.subarray(start, end));
}
