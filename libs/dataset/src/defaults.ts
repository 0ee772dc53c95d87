import { Compressor } from '#libs/recordio';

/**
 * Default chunk size for converted datasets, counting record bytes before compression. Small
 * next to RecordIO's own 32 MiB default because a task is a group of chunks, and a dataset
 * should give tens of tasks.
 */
export const DATASET_MAX_CHUNK_SIZE_BYTES = 1_048_576;

/**
 * Chunk size for Fashion-MNIST: a record is 800 bytes (4 header, 8 dims, 784 pixels, 4 label),
 * and a new chunk starts when `bytesInChunk + 800 > 800_000`, so every chunk holds exactly 1,000
 * records: 60 chunks for the 60,000 training images, 10 for the 10,000 test images.
 */
export const FASHION_MNIST_MAX_CHUNK_SIZE_BYTES = 800_000;

/** Chunks per shard file unless told otherwise; the last shard may hold fewer. */
export const CHUNKS_PER_FILE = 8;

/** Compressor used by the converters unless told otherwise. */
export const DATASET_COMPRESSOR: Compressor = Compressor.Snappy;

/** Where Debian's `fashion-mnist` package puts the IDX files. */
export const FASHION_MNIST_SOURCE_DIR = '/usr/share/datasets/fashion-mnist';

/** How often, in records, the converters report progress (they always report the last record too). */
export const PROGRESS_INTERVAL_RECORDS = 1000;
