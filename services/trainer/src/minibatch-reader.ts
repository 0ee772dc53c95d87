import { taskRecordRandom, type ShuffleSettings } from '#libs/data-order';
import { decodeBatch, type Batch, type RecordLayout } from '#libs/learner';
import { ChunkError, readChunkAt } from '#libs/recordio';
import type { TaskMessage } from '#libs/messaging';
import { TaskDataError } from './errors.js';
import { ShuffleBuffer } from './shuffle-buffer.js';

/** One chunk of a task: where it lies and how many records the index counted in it. */
export type TaskChunk = TaskMessage['chunks'][number];

/** What the reader needs of a task: its chunks, and the epoch and id that seed its record order. */
export type TaskData = Pick<TaskMessage, 'chunks' | 'epoch' | 'taskId'>;

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
  /** Records through a seeded shuffle buffer (`training.shuffle`); absent: file order. */
  shuffle?: ShuffleSettings;
}

/** One example of a decoded chunk. */
interface ExampleRef {
  batch: Batch;
  index: number;
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

/** The examples `refs` name, in that order, copied into new arrays. */
function gatherExamples(refs: readonly ExampleRef[], perExample: number): Batch {
  const features = new Float32Array(refs.length * perExample);
  const labels =
    refs[0]?.batch.labels instanceof Float32Array ? new Float32Array(refs.length) : new Int32Array(refs.length);
  refs.forEach(({ batch, index }, k) => {
    features.set(batch.features.subarray(index * perExample, (index + 1) * perExample), k * perExample);
    labels[k] = batch.labels[index]!;
  });
  return { features, labels, size: refs.length };
}

/**
 * Turns the chunks of a task into minibatches of `batchSize` examples across chunk boundaries;
 * the last one may be smaller. Without `shuffle` the examples keep file order. With it they pass
 * through a {@link ShuffleBuffer} of `shuffle.bufferRecords` records, or, when that is absent, of
 * as many records as the task's largest chunk holds (the counts the master's index put in the
 * task message): the order is drawn from the job seed, the epoch and the task id, so every
 * trainer that reads the task in that epoch gets the same minibatches. Chunks are read one at a
 * time and decoded whole, so a bad chunk is named by its file and offset (`TaskDataError`, or
 * the RecordIO error itself).
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

  /** The minibatches of a task. */
  batches(task: TaskData): AsyncGenerator<Batch> {
    const { shuffle } = this.options;
    return shuffle === undefined ? this.inFileOrder(task.chunks) : this.shuffled(task, shuffle);
  }

  /** Records in file order, sliced out of each decoded chunk without copying where possible. */
  private async *inFileOrder(chunks: readonly TaskChunk[]): AsyncGenerator<Batch> {
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

  /** Records in the order of the task's shuffle buffer. */
  private async *shuffled(task: TaskData, shuffle: ShuffleSettings): AsyncGenerator<Batch> {
    const { batchSize } = this.options;
    const capacity = shuffle.bufferRecords ?? task.chunks.reduce((most, c) => Math.max(most, c.numRecords), 1);
    const buffer = new ShuffleBuffer<ExampleRef>(capacity, taskRecordRandom(shuffle.seed, task.epoch, task.taskId));
    let picked: ExampleRef[] = [];
    for (const chunk of task.chunks) {
      const decoded = await this.readDecoded(chunk);
      if (decoded === undefined) continue;
      for (let index = 0; index < decoded.size; index++) {
        const out = buffer.push({ batch: decoded, index });
        if (out === undefined) continue;
        picked.push(out);
        if (picked.length === batchSize) {
          yield gatherExamples(picked, this.perExample);
          picked = [];
        }
      }
    }
    for (let out = buffer.take(); out !== undefined; out = buffer.take()) {
      picked.push(out);
      if (picked.length === batchSize) {
        yield gatherExamples(picked, this.perExample);
        picked = [];
      }
    }
    if (picked.length > 0) yield gatherExamples(picked, this.perExample);
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
