/**
 * Datasets for Tributary: the example record layout, IDX and CSV readers, and converters that
 * write RecordIO shards.
 */
export {
  CHUNKS_PER_FILE,
  DATASET_COMPRESSOR,
  DATASET_MAX_CHUNK_SIZE_BYTES,
  FASHION_MNIST_MAX_CHUNK_SIZE_BYTES,
  FASHION_MNIST_SOURCE_DIR,
  PROGRESS_INTERVAL_RECORDS,
} from './defaults.js';
export {
  CsvFormatError,
  DatasetMismatchError,
  IdxFormatError,
  InvalidConvertOptionError,
  InvalidExampleError,
  MalformedRecordError,
  MissingDatasetFileError,
} from './errors.js';
export {
  EXAMPLE_FORMAT_VERSION,
  decodeExample,
  encodeExample,
  encodeExampleValues,
  exampleRecordSize,
  parseExampleHeader,
} from './example-record.js';
export { IDX_TYPE_CODES, encodeIdx, readIdx } from './idx.js';
export { readCsvRows } from './csv-reader.js';
export { convertIdx } from './convert-idx.js';
export { convertCsv } from './convert-csv.js';
export { FASHION_MNIST_FILES, convertFashionMnist } from './fashion-mnist.js';
export { ShardedRecordWriter, shardPath } from './shard-writer.js';
export { readExamples, readIdxExamples } from './read-examples.js';

export type {
  DecodedExample,
  Example,
  ExampleEncoding,
  ExampleHeader,
  FeatureDtype,
  LabelDtype,
} from './example-record.js';
export type { IdxArray, IdxData, IdxDataType } from './idx.js';
export type { CsvRow } from './csv-reader.js';
export type { ConvertIdxOptions } from './convert-idx.js';
export type { ConvertCsvOptions } from './convert-csv.js';
export type { ConvertFashionMnistOptions, FashionMnistSplit, FashionMnistSummary } from './fashion-mnist.js';
export type { ConversionSummary, ShardOptions } from './shard-writer.js';
export type { ProgressCallback } from './progress.js';
export type { ExampleArrays, LocatedExample } from './read-examples.js';
