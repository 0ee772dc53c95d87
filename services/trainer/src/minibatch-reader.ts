import { decodeBatch, type Batch, type RecordLayout } from '#libs/learner';
import { ChunkError, readChunkAt } from '#libs/recordio';
import type { TaskMessage } from '#libs/messaging';
import { TaskDataError } from './errors.js';

/** One chunk of a task: where it lies and how many records the index counted in it. */
export type TaskChunk = TaskMessage['chunks'][number];

/** Reads the records of the chunk at `offset` in `file` (`readChunkAt` by default). */
export type ChunkSource = (file: string, offset: number) => Promise<{ records: Uint8Array[] }>;

/** Decodes records into a batch (`decodeBatch` by default). */
export type RecordDecoder = (records: readonly Uint8Array[], layout: RecordLayout) => Batch;

/** Settings of a `MinibatchReader`. */
export interface MinibatchReaderOptions {
  /** Examples per minibatch (`training.batchSize`). */
  batchSize: number;
  layout: RecordLayout;
  readChunk?: ChunkSource;
  decode?: RecordDecoder;
}

/** Examples `[start, end)` of a batch, sharing its memory. */
export function sliceBatch(batch: Batch, start: number, end: number, perExample: number): Batch {
  return {
    features: batch.features.subarray(start * perExample, end * perExample),
    labels: batch.labels.subarray(start, end),
    size: end - start,
  };
}

/** The examples of `a` followed by those of `b`, in new arrays. */
export function concatBatches(a: Batch, b: Batch): Batch {
  const features = new Float32Array(a.features.length + b.features.length);
  features.set(a.features);
  features.set(b.features, a.features.length);
  const labels = a.labels instanceof Int32Array ? new Int32Array(a.size + b.size) : new Float32Array(a.size + b.size);
  labels.set(a.labels);
  labels.set(b.labels, a.size);
  return { features, labels, size: a.size + b.size };
}

/**
 * Turns the chunks of a task into minibatches of `batchSize` examples, in order, across chunk
 * boundaries; the last one may be smaller. Chunks are read one at a time and decoded whole, so a
 * bad chunk is named by its file and offset (`TaskDataError`, or the RecordIO error itself).
 */
export class MinibatchReader {
  private readonly readChunk: ChunkSource;
  private readonly decode: RecordDecoder;
  private readonly perExample: number;

  constructor(private readonly options: MinibatchReaderOptions) {
    if (!Number.isInteger(options.batchSize) || options.batchSize < 1) {
      throw new RangeError(`batch size ${options.batchSize} must be a positive integer`);
    }
    this.readChunk = options.readChunk ?? readChunkAt;
    this.decode = options.decode ?? decodeBatch;
    this.perExample = options.layout.featureShape.reduce((a, b) => a * b, 1);
  }

  /** The minibatches of `chunks`, in order. */
  async *batches(chunks: readonly TaskChunk[]): AsyncGenerator<Batch> {
    const { batchSize } = this.options;
    let pending: Batch | undefined;
    for (const chunk of chunks) {
      const decoded = await this.readDecoded(chunk);
      if (decoded === undefined) continue;
      let batch: Batch = pending === undefined ? decoded : concatBatches(pending, decoded);
      pending = undefined;
      let start = 0;
      for (; start + batchSize <= batch.size; start += batchSize) {
        yield sliceBatch(batch, start, start + batchSize, this.perExample);
      }
      if (start < batch.size) {
        batch = sliceBatch(batch, start, batch.size, this.perExample);
        pending = batch;
      }
    }
    if (pending !== undefined) yield pending;
  }

  private async readDecoded(chunk: TaskChunk): Promise<Batch | undefined> {
    let records: Uint8Array[];
    try {
      records = (await this.readChunk(chunk.file, chunk.offset)).records;
    } catch (err) {
      if (err instanceof ChunkError) throw err;
      throw new TaskDataError(chunk.file, chunk.offset, (err as Error).message, { cause: err });
    }
    if (records.length !== chunk.numRecords) {
      throw new TaskDataError(
        chunk.file,
        chunk.offset,
        `holds ${records.length} records but the task says ${chunk.numRecords}; was the file rewritten?`,
      );
    }
    if (records.length === 0) return undefined;
    try {
      return this.decode(records, this.options.layout);
    } catch (err) {
      throw new TaskDataError(chunk.file, chunk.offset, (err as Error).message, { cause: err });
    }
  }
}
