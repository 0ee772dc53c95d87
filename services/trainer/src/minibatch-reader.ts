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

/**
 * The examples a shuffle buffer holds, copied out of their chunks into slots of one array: the
 * buffer then keeps only them alive, not the chunks they came from, and taking an example in
 * costs a copy, not an allocation. One slot more than the buffer holds is free whenever an
 * example comes in (see {@link MinibatchReader}'s `shuffled`).
 */
class ExampleSlots {
  private readonly features: Float32Array;
  private readonly labels: Float32Array | Int32Array;
  private readonly free: number[];

  constructor(
    slots: number,
    private readonly perExample: number,
    labelDtype: RecordLayout['labelDtype'],
  ) {
    this.features = new Float32Array(slots * perExample);
    this.labels = labelDtype === 'float32' ? new Float32Array(slots) : new Int32Array(slots);
    this.free = Array.from({ length: slots }, (_, i) => slots - 1 - i);
  }

  /** Copies example `i` of `batch` into a free slot, and returns the slot. */
  put(batch: Batch, i: number): number {
    const slot = this.free.pop();
    if (slot === undefined) throw new Error('no free example slot');
    const pe = this.perExample;
    this.features.set(batch.features.subarray(i * pe, (i + 1) * pe), slot * pe);
    this.labels[slot] = batch.labels[i]!;
    return slot;
  }

  /** Copies the example in `slot` to position `k` of `into`, and frees the slot. */
  moveOut(slot: number, into: Batch, k: number): void {
    const pe = this.perExample;
    into.features.set(this.features.subarray(slot * pe, (slot + 1) * pe), k * pe);
    into.labels[k] = this.labels[slot]!;
    this.free.push(slot);
  }
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

function sameChunk(a: TaskChunk, b: TaskChunk): boolean {
  return a.file === b.file && a.offset === b.offset && a.numRecords === b.numRecords;
}

/** A batch of `size` examples in new arrays, to be filled. */
function emptyBatch(size: number, perExample: number, labelDtype: RecordLayout['labelDtype']): Batch {
  const labels = labelDtype === 'float32' ? new Float32Array(size) : new Int32Array(size);
  return { features: new Float32Array(size * perExample), labels, size };
}

/**
 * Turns the chunks of a task into minibatches of `batchSize` examples across chunk boundaries;
 * the last one may be smaller. Without `shuffle` the examples keep file order. With it they pass
 * through a {@link ShuffleBuffer} of `shuffle.bufferRecords` records, or, when that is absent, of
 * as many records as the task's largest chunk holds (the counts the master's index put in the
 * task message); the buffer holds copies of its decoded examples (in one array allocated per
 * task), so memory is the buffer plus the chunk in use and the one read ahead. The order is
 * drawn from the job seed, the epoch and the task id, so every trainer that reads the task in
 * that epoch gets the same minibatches.
 * Chunks are decoded whole, one ahead of the one in use (see `decodedChunks`; the next task's
 * first chunk can be read before that task starts, see `readAhead`), so a bad chunk is named by
 * its file and offset (`TaskDataError`, or the RecordIO error itself).
 */
export class MinibatchReader {
  private readonly readChunk: ChunkSource;
  private readonly decode: RecordDecoder;
  private readonly perExample: number;
  /** The first chunk of the task that comes next, read ahead (`readAhead`). */
  private early: { chunk: TaskChunk; read: Promise<Batch | undefined> } | undefined;

  constructor(private readonly options: MinibatchReaderOptions) {
    if (!Number.isInteger(options.batchSize) || options.batchSize < 1) {
      throw new RangeError(`batch size ${options.batchSize} must be a positive integer`);
    }
    this.readChunk = options.readChunk ?? readChunkAt;
    this.decode = options.decode ?? decodeBatch;
    this.perExample = options.layout.featureShape.reduce((a, b) => a * b, 1);
  }

  /**
   * Starts reading the first chunk of the task that comes next, while the task in hand still
   * trains, so that the next task's first minibatch does not wait on the disk. `batches` uses the
   * read when that task's first chunk is the same one, and drops it otherwise; only the latest
   * read ahead is kept. A read that fails is reported when the chunk is reached.
   */
  readAhead(task: Pick<TaskData, 'chunks'>): void {
    const chunk = task.chunks[0];
    if (chunk === undefined) return;
    const read = this.readDecoded(chunk);
    read.catch(() => undefined);
    this.early = { chunk, read };
  }

  /** The minibatches of a task. */
  batches(task: TaskData): AsyncGenerator<Batch> {
    const { shuffle } = this.options;
    return shuffle === undefined ? this.inFileOrder(task.chunks) : this.shuffled(task, shuffle);
  }

  /**
   * Records in file order, sliced out of each decoded chunk without copying, but for a batch that
   * spans two chunks: only its own examples are copied, not the chunk it completes.
   */
  private async *inFileOrder(chunks: readonly TaskChunk[]): AsyncGenerator<Batch> {
    const { batchSize } = this.options;
    const pe = this.perExample;
    let pending: Batch | undefined;
    for await (const decoded of this.decodedChunks(chunks)) {
      let start = 0;
      if (pending !== undefined) {
        start = Math.min(batchSize - pending.size, decoded.size);
        pending = concatBatches(pending, sliceBatch(decoded, 0, start, pe));
        if (pending.size < batchSize) continue;
        yield pending;
        pending = undefined;
      }
      for (; start + batchSize <= decoded.size; start += batchSize) {
        yield sliceBatch(decoded, start, start + batchSize, pe);
      }
      if (start < decoded.size) pending = sliceBatch(decoded, start, decoded.size, pe);
    }
    if (pending !== undefined) yield pending;
  }

  /** Records in the order of the task's shuffle buffer. */
  private async *shuffled(task: TaskData, shuffle: ShuffleSettings): AsyncGenerator<Batch> {
    const { batchSize } = this.options;
    const capacity = shuffle.bufferRecords ?? task.chunks.reduce((most, c) => Math.max(most, c.numRecords), 1);
    const { labelDtype } = this.options.layout;
    const pe = this.perExample;
    const buffer = new ShuffleBuffer<number>(capacity, taskRecordRandom(shuffle.seed, task.epoch, task.taskId));
    const slots = new ExampleSlots(capacity + 1, pe, labelDtype);
    let batch = emptyBatch(batchSize, pe, labelDtype);
    let filled = 0;
    for await (const decoded of this.decodedChunks(task.chunks)) {
      for (let i = 0; i < decoded.size; i++) {
        const out = buffer.push(slots.put(decoded, i));
        if (out === undefined) continue;
        slots.moveOut(out, batch, filled++);
        if (filled === batchSize) {
          yield batch;
          batch = emptyBatch(batchSize, pe, labelDtype);
          filled = 0;
        }
      }
    }
    for (let out = buffer.take(); out !== undefined; out = buffer.take()) {
      slots.moveOut(out, batch, filled++);
      if (filled === batchSize) {
        yield batch;
        batch = emptyBatch(batchSize, pe, labelDtype);
        filled = 0;
      }
    }
    if (filled > 0) yield sliceBatch(batch, 0, filled, pe);
  }

  /**
   * The task's chunks that hold records, decoded, in order; each is read while the one before is
   * in use (one chunk ahead), so its read and decompression overlap training. A read that fails
   * is reported when its chunk is reached.
   */
  private async *decodedChunks(chunks: readonly TaskChunk[]): AsyncGenerator<Batch> {
    const early = this.early;
    this.early = undefined;
    const readAhead = (i: number): Promise<Batch | undefined> | undefined => {
      if (i >= chunks.length) return undefined;
      if (i === 0 && early !== undefined && sameChunk(early.chunk, chunks[0]!)) return early.read;
      const read = this.readDecoded(chunks[i]!);
      read.catch(() => undefined);
      return read;
    };
    let ahead = readAhead(0);
    for (let i = 0; ahead !== undefined; i++) {
      const decoded = await ahead;
      ahead = readAhead(i + 1);
      if (decoded !== undefined) yield decoded;
    }
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
