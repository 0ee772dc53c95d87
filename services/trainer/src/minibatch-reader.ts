import { performance } from 'node:perf_hooks';
import { taskRecordRandom, type ShuffleSettings } from '#libs/data-order';
import { FeatureWriter, checkRecords, type Batch, type CheckedRecords, type RecordLayout } from '#libs/learner';
import { ChunkError, readChunkAt } from '#libs/recordio';
import type { TaskMessage } from '#libs/messaging';
import { ChunkCache, type ChunkCacheStats } from './chunk-cache.js';
import { CHUNK_CACHE_BYTES } from './defaults.js';
import { TaskDataError } from './errors.js';
import { ShuffleBuffer } from './shuffle-buffer.js';

/** One chunk of a task: where it lies and how many records the index counted in it. */
export type TaskChunk = TaskMessage['chunks'][number];

/** What the reader needs of a task: its chunks, and the epoch and id that seed its record order. */
export type TaskData = Pick<TaskMessage, 'chunks' | 'epoch' | 'taskId'>;

/** Reads the records of the chunk at `offset` in `file` (`readChunkAt` by default). */
export type ChunkSource = (file: string, offset: number) => Promise<{ records: Uint8Array[] }>;

/**
 * Memory the minibatches assembled ahead of their task may take (`prepareWhile`): 32 MiB, 160
 * minibatches of the example's 64 Fashion-MNIST images in float32, 640 as bytes
 * (`featureBytes`); at least one minibatch.
 */
export const PREPARED_BYTES = 32 * 1024 * 1024;

/** Settings of a `MinibatchReader`. */
export interface MinibatchReaderOptions {
  /** Examples per minibatch (`training.batchSize`). */
  batchSize: number;
  layout: RecordLayout;
  readChunk?: ChunkSource;
  /** Records through a seeded shuffle buffer (`training.shuffle`); absent: file order. */
  shuffle?: ShuffleSettings;
  /**
   * Hands uint8 features over as the records hold them (`Batch.featureBytes`), for a learner that
   * converts them itself (`Learner.readsByteFeatures`); float32 features are converted as ever.
   */
  featureBytes?: boolean;
  /** Memory for minibatches assembled ahead (`prepareWhile`); {@link PREPARED_BYTES} by default. */
  preparedBytes?: number;
  /**
   * Memory for chunks kept, read and checked, for the epochs after the one that read them
   * (`TRAINER_CHUNK_CACHE_MB`); {@link CHUNK_CACHE_BYTES} by default, 0 keeps none.
   */
  cacheBytes?: number;
}

/**
 * The examples a shuffle buffer holds, their features copied out of their chunks as the records
 * hold them (bytes, not yet float32) into slots of one array: the buffer then keeps only them
 * alive, not the chunks they came from, taking an example in costs a copy of its bytes, not an
 * allocation, and each example is converted to float32 once, as it goes into its minibatch. One
 * slot more than the buffer holds is free whenever an example comes in (see
 * {@link MinibatchReader}'s `shuffled`).
 */
class ExampleSlots {
  private readonly bytes: Uint8Array;
  private readonly labels: Float32Array | Int32Array;
  private readonly free: number[];

  constructor(
    slots: number,
    private readonly writer: FeatureWriter,
    labelDtype: RecordLayout['labelDtype'],
  ) {
    this.bytes = new Uint8Array(slots * writer.featureBytes);
    this.labels = labelDtype === 'float32' ? new Float32Array(slots) : new Int32Array(slots);
    this.free = Array.from({ length: slots }, (_, i) => slots - 1 - i);
  }

  /** Copies example `i` of the checked records into a free slot, and returns the slot. */
  put(checked: CheckedRecords, i: number): number {
    const slot = this.free.pop();
    if (slot === undefined) throw new Error('no free example slot');
    const size = this.writer.featureBytes;
    const start = checked.featuresOffsets[i]!;
    this.bytes.set(checked.records[i]!.subarray(start, start + size), slot * size);
    this.labels[slot] = checked.labels[i]!;
    return slot;
  }

  /**
   * Puts the example in `slot` into the minibatch `fill` fills, and frees the slot; the minibatch
   * when that filled it.
   */
  moveOut(slot: number, fill: MinibatchFill): Batch | undefined {
    const full = fill.put(this.bytes, slot * this.writer.featureBytes, this.labels[slot]!);
    this.free.push(slot);
    return full;
  }
}

/** Examples `[start, end)` of a batch, sharing its memory. */
export function sliceBatch(batch: Batch, start: number, end: number, perExample: number): Batch {
  const bytes = batch.featureBytes;
  return {
    features: bytes ? batch.features : batch.features.subarray(start * perExample, end * perExample),
    ...(bytes ? { featureBytes: bytes.subarray(start * perExample, end * perExample) } : {}),
    labels: batch.labels.subarray(start, end),
    size: end - start,
  };
}

/** The features of a minibatch whose features come as bytes (`Batch.featureBytes`). */
const NO_FEATURES = new Float32Array(0);

/** The array a minibatch's features are kept in, bytes or float32. */
function featureArray(batch: Batch): Uint8Array | Float32Array {
  return batch.featureBytes ?? batch.features;
}

/**
 * How many of the minibatches a task handed out the training loop may still hold: the one just
 * handed out, the one it trains (it asks for the next before it trains one), and the one before,
 * whose push may still be on its way (`overlapPushes`) and be trained again if it is refused.
 * Older ones go back to the pool.
 */
const HELD_BY_LOOP = 3;

/**
 * Minibatch arrays the training loop is through with, filled again instead of new ones: every
 * new array counts towards the external memory at which V8 starts a full mark-compact, and a
 * minibatch of the example's 64 images is 200 KiB, so a trainer that took a new one each step set
 * one off every few hundred milliseconds (about 25 ms of marking each on the trainer's thread).
 * Keeps at most `keep` free arrays; any other is left to the garbage collector.
 */
class BatchPool {
  private readonly free: Batch[] = [];
  private readonly isFree = new WeakSet<Batch>();
  /** The full minibatch each array handed out belongs to (a task's last one is a view of one). */
  private readonly owners = new WeakMap<ArrayBufferLike, Batch>();

  /** `asBytes`: minibatches hold their features as bytes (`Batch.featureBytes`), not float32. */
  constructor(
    private readonly size: number,
    private readonly perExample: number,
    private readonly labelDtype: RecordLayout['labelDtype'],
    private readonly keep: number,
    private readonly asBytes: boolean,
  ) {}

  /** A minibatch of `size` examples to fill, whose arrays may hold an earlier one's values. */
  take(): Batch {
    const batch = this.free.pop();
    if (batch !== undefined) {
      this.isFree.delete(batch);
      return batch;
    }
    const labels = this.labelDtype === 'float32' ? new Float32Array(this.size) : new Int32Array(this.size);
    const values = this.size * this.perExample;
    const made: Batch = this.asBytes
      ? { features: NO_FEATURES, featureBytes: new Uint8Array(values), labels, size: this.size }
      : { features: new Float32Array(values), labels, size: this.size };
    this.owners.set(featureArray(made).buffer, made);
    return made;
  }

  /** Takes back the minibatch `batch` (or a part of it) was handed out as. */
  give(batch: Batch): void {
    const owner = this.owners.get(featureArray(batch).buffer);
    if (owner === undefined || this.isFree.has(owner) || this.free.length >= this.keep) return;
    this.isFree.add(owner);
    this.free.push(owner);
  }
}

/**
 * The minibatch being filled, one example at a time: {@link put} writes example `filled` of
 * `batch` (uint8 features are gathered as bytes and converted once the minibatch is complete,
 * see `FeatureWriter.writeGathered`, or handed over as bytes, `Batch.featureBytes`) and hands
 * over the batch once it holds `size` examples, starting a new one.
 */
class MinibatchFill {
  filled = 0;
  private filling: Batch | undefined;
  /** The uint8 features of the examples put so far, end to end, when the writer gathers bytes. */
  private readonly gathered: Uint8Array | undefined;

  constructor(
    private readonly pool: BatchPool,
    private readonly writer: FeatureWriter,
    batchSize: number,
  ) {
    if (writer.gathersBytes) this.gathered = new Uint8Array(batchSize * writer.featureBytes);
  }

  /** The minibatch being filled, taken from the pool when its first example comes. */
  get batch(): Batch {
    return (this.filling ??= this.pool.take());
  }

  /**
   * Writes the example whose features start at byte `start` of `source`, and its label, into the
   * minibatch; the minibatch when that filled it.
   */
  put(source: Uint8Array, start: number, label: number): Batch | undefined {
    const batch = this.batch;
    const k = this.filled;
    const gathered = batch.featureBytes ?? this.gathered;
    if (gathered === undefined) this.writer.write(batch.features, k, source, start);
    else this.writer.gather(gathered, k, source, start);
    batch.labels[k] = label;
    this.filled += 1;
    if (this.filled < batch.size) return undefined;
    this.complete(batch, this.filled);
    this.filling = undefined;
    this.filled = 0;
    return batch;
  }

  /** The examples of a batch left partly filled, if any (the task's last minibatch). */
  rest(): Batch | undefined {
    if (this.filling === undefined) return undefined;
    this.complete(this.filling, this.filled);
    return sliceBatch(this.filling, 0, this.filled, this.writer.perExample);
  }

  private complete(batch: Batch, count: number): void {
    if (this.gathered !== undefined && batch.featureBytes === undefined) {
      this.writer.writeGathered(batch.features, this.gathered, count);
    }
  }
}

function sameChunk(a: TaskChunk, b: TaskChunk): boolean {
  return a.file === b.file && a.offset === b.offset && a.numRecords === b.numRecords;
}

function sameTask(a: TaskData, b: TaskData): boolean {
  return (
    a.taskId === b.taskId &&
    a.epoch === b.epoch &&
    a.chunks.length === b.chunks.length &&
    a.chunks.every((chunk, i) => sameChunk(chunk, b.chunks[i]!))
  );
}

/**
 * A task's minibatches, some assembled before the training loop asks for them: `pending` holds
 * the results of the calls on `source` made ahead, in order (a failed read among them fails when
 * the task reaches it); the loop takes them first, then goes on with `source`.
 */
class MinibatchStream {
  readonly pending: Promise<IteratorResult<Batch>>[] = [];
  /** Nothing more is assembled ahead: the loop is through with the task, or another came. */
  stopped = false;
  /** `source` has nothing more (or failed). */
  ended = false;
  private filling = false;

  /** The minibatches handed out to the training loop that have not gone back to the pool. */
  private readonly handedOut: Batch[] = [];

  constructor(
    readonly task: TaskData,
    readonly source: AsyncGenerator<Batch>,
    private readonly limit: number,
    private readonly pool: BatchPool,
  ) {}

  /**
   * Assembles minibatches, one per turn of the event loop (so replies on the network are read
   * between them), until `busy` settles, `limit` are waiting, the task has no more or it is
   * stopped. Resolves when it stops.
   */
  async fillWhile(busy: Promise<unknown>): Promise<void> {
    if (this.filling) return;
    this.filling = true;
    let waiting = true;
    busy.then(
      () => (waiting = false),
      () => (waiting = false),
    );
    try {
      while (!this.ended && !this.stopped && this.pending.length < this.limit) {
        await new Promise((resolve) => setImmediate(resolve));
        if (!waiting || this.stopped) break;
        const next = this.source.next();
        this.pending.push(next);
        const item = await next.catch(() => undefined);
        if (item === undefined || item.done === true) this.ended = true;
      }
    } finally {
      this.filling = false;
    }
  }

  /** The task's minibatches: those assembled ahead, then the rest. */
  async *batches(): AsyncGenerator<Batch> {
    try {
      for (;;) {
        const item = await (this.pending.shift() ?? this.source.next());
        if (item.done === true) return;
        this.handedOut.push(item.value);
        while (this.handedOut.length > HELD_BY_LOOP) this.pool.give(this.handedOut.shift()!);
        yield item.value;
      }
    } finally {
      this.ended = true;
      this.stop();
      await this.source.return(undefined);
    }
  }

  /** The training loop is through with the task: every minibatch it was handed goes back. */
  release(): void {
    for (const batch of this.handedOut.splice(0)) this.pool.give(batch);
  }

  /** No more is assembled ahead; what was is dropped. */
  stop(): void {
    this.stopped = true;
    for (const result of this.pending.splice(0)) result.catch(() => undefined);
  }

  /** Given up: another task came instead. */
  drop(): void {
    this.stop();
    this.source.return(undefined).catch(() => undefined);
  }
}

/**
 * Turns the chunks of a task into minibatches of `batchSize` examples across chunk boundaries;
 * the last one may be smaller. Without `shuffle` the examples keep file order. With it they pass
 * through a {@link ShuffleBuffer} of `shuffle.bufferRecords` records, or, when that is absent, of
 * as many records as the task's largest chunk holds (the counts the master's index put in the
 * task message); the buffer holds copies of its examples' feature bytes (in one array allocated
 * per task), so memory is the buffer plus the chunk in use and the one read ahead. The order is
 * drawn from the job seed, the epoch and the task id, so every trainer that reads the task in
 * that epoch gets the same minibatches.
 * Chunks are read and checked whole, one ahead of the one in use (see `checkedChunks`; the next
 * task's first chunk can be read before that task starts, see `readAhead`), so a bad chunk is
 * named by its file and offset (`TaskDataError`, or the RecordIO error itself) before any of its
 * examples comes out. Each example's features become float32 (scaled as the layout says) once,
 * straight into the minibatch that takes it. While the trainer waits on the network, the
 * minibatches that come next are assembled ahead (`prepareWhile`).
 */
export class MinibatchReader {
  private readonly readChunk: ChunkSource;
  private readonly writer: FeatureWriter;
  /** The first chunk of the task that comes next, read ahead (`readAhead`). */
  private early: { chunk: TaskChunk; read: Promise<CheckedRecords | undefined> } | undefined;
  /** The task that comes next, as `readAhead` was told it. */
  private nextTask: TaskData | undefined;
  /** The minibatches of the task in hand. */
  private current: MinibatchStream | undefined;
  /** Those of the task that comes next, when some were assembled ahead (`prepareWhile`). */
  private prepared: MinibatchStream | undefined;
  /** Minibatches assembled ahead of the loop, at most, per task (`preparedBytes`). */
  private readonly preparedLimit: number;
  private readonly pool: BatchPool;
  /** Chunks read and checked, by file and offset. */
  private readonly cache: ChunkCache<CheckedRecords | undefined>;
  /** See {@link assemblyMs}. */
  private assembled = 0;
  /** When the minibatch code running now resumed (see `resume`). */
  private resumedAt = 0;

  constructor(private readonly options: MinibatchReaderOptions) {
    if (!Number.isInteger(options.batchSize) || options.batchSize < 1) {
      throw new RangeError(`batch size ${options.batchSize} must be a positive integer`);
    }
    this.readChunk = options.readChunk ?? readChunkAt;
    this.writer = new FeatureWriter(options.layout);
    const asBytes = options.featureBytes === true && this.writer.gathersBytes;
    const bytes = options.batchSize * this.writer.perExample * (asBytes ? 1 : 4);
    this.preparedLimit = Math.max(1, Math.floor((options.preparedBytes ?? PREPARED_BYTES) / bytes));
    this.pool = new BatchPool(
      options.batchSize,
      this.writer.perExample,
      options.layout.labelDtype,
      this.preparedLimit + HELD_BY_LOOP,
      asBytes,
    );
    this.cache = new ChunkCache(options.cacheBytes ?? CHUNK_CACHE_BYTES, checkedBytes);
  }

  /**
   * Milliseconds this reader has spent assembling minibatches since it was made: taking records
   * out of their chunks, through the shuffle buffer, into minibatches; not the waits on
   * the disk. The step phases take the share of it that ran during a push or a pull (the
   * minibatches assembled ahead, `prepareWhile`) out of the call and count it as `decode`.
   */
  get assemblyMs(): number {
    return this.assembled;
  }

  /** Minibatch code starts to run: up to the next `pause` (a yield, or a wait for a chunk). */
  private resume(): void {
    this.resumedAt = performance.now();
  }

  /** Minibatch code stops running; the stretch since `resume` is counted. */
  private pause(): void {
    this.assembled += performance.now() - this.resumedAt;
  }

  /** What the chunk cache has done for this reader's job so far. */
  cacheStats(): ChunkCacheStats {
    return this.cache.stats();
  }

  /**
   * Starts reading the first chunk of the task that comes next, while the task in hand still
   * trains, so that the next task's first minibatch does not wait on the disk. `batches` uses the
   * read when that task's first chunk is the same one, and drops it otherwise; only the latest
   * read ahead is kept. A read that fails is reported when the chunk is reached.
   */
  readAhead(task: TaskData): void {
    this.nextTask = task;
    const chunk = task.chunks[0];
    if (chunk === undefined) return;
    const read = this.readChecked(chunk);
    read.catch(() => undefined);
    this.early = { chunk, read };
  }

  /**
   * While `busy` is pending (the trainer waits on the network: a push, the end of a round),
   * assembles the minibatches that come next, so that reading, shuffling and the conversion to
   * float32 fill the wait rather than come before the next steps: those of the task in hand, and
   * once it has no more, the first ones of the task read ahead (`readAhead`). One minibatch per
   * turn of the event loop, as many as {@link PREPARED_BYTES} hold; `batches` of the task read
   * ahead takes them first, and another task drops them.
   */
  prepareWhile(busy: Promise<unknown>): void {
    const current = this.current;
    if (current === undefined || current.stopped || current.ended) {
      this.prepareNext(busy);
      return;
    }
    void current.fillWhile(busy).then(() => {
      if (current.ended && this.current === current) this.prepareNext(busy);
    });
  }

  private prepareNext(busy: Promise<unknown>): void {
    const task = this.nextTask;
    if (task === undefined) return;
    if (this.prepared !== undefined && !sameTask(this.prepared.task, task)) {
      this.prepared.drop();
      this.prepared = undefined;
    }
    this.prepared ??= this.stream(task);
    void this.prepared.fillWhile(busy);
  }

  /** The minibatches of a task. */
  batches(task: TaskData): AsyncGenerator<Batch> {
    const prepared = this.prepared;
    this.prepared = undefined;
    // The task read ahead comes now, or never (see `checkedChunks`).
    this.nextTask = undefined;
    // A new task is asked for once the loop is through with the last one.
    this.current?.release();
    this.current?.stop();
    const ready = prepared !== undefined && sameTask(prepared.task, task) ? prepared : undefined;
    if (ready === undefined) prepared?.drop();
    this.current = ready ?? this.stream(task);
    return this.current.batches();
  }

  private stream(task: TaskData): MinibatchStream {
    return new MinibatchStream(task, this.freshBatches(task), this.preparedLimit, this.pool);
  }

  private freshBatches(task: TaskData): AsyncGenerator<Batch> {
    const { shuffle } = this.options;
    return shuffle === undefined ? this.inFileOrder(task.chunks) : this.shuffled(task, shuffle);
  }

  private fill(): MinibatchFill {
    return new MinibatchFill(this.pool, this.writer, this.options.batchSize);
  }

  /** Records in file order, each written into its minibatch from the chunk that holds it. */
  private async *inFileOrder(chunks: readonly TaskChunk[]): AsyncGenerator<Batch> {
    const fill = this.fill();
    for await (const checked of this.checkedChunks(chunks)) {
      this.resume();
      for (let i = 0; i < checked.records.length; i++) {
        const full = fill.put(checked.records[i]!, checked.featuresOffsets[i]!, checked.labels[i]!);
        if (full !== undefined) {
          this.pause();
          yield full;
          this.resume();
        }
      }
      this.pause();
    }
    const rest = fill.rest();
    if (rest !== undefined) yield rest;
  }

  /** Records in the order of the task's shuffle buffer. */
  private async *shuffled(task: TaskData, shuffle: ShuffleSettings): AsyncGenerator<Batch> {
    const { labelDtype } = this.options.layout;
    const capacity = shuffle.bufferRecords ?? task.chunks.reduce((most, c) => Math.max(most, c.numRecords), 1);
    const buffer = new ShuffleBuffer<number>(capacity, taskRecordRandom(shuffle.seed, task.epoch, task.taskId));
    const slots = new ExampleSlots(capacity + 1, this.writer, labelDtype);
    const fill = this.fill();
    const moveOut = (slot: number): Batch | undefined => slots.moveOut(slot, fill);
    for await (const checked of this.checkedChunks(task.chunks)) {
      this.resume();
      for (let i = 0; i < checked.records.length; i++) {
        const out = buffer.push(slots.put(checked, i));
        const full = out === undefined ? undefined : moveOut(out);
        if (full !== undefined) {
          this.pause();
          yield full;
          this.resume();
        }
      }
      this.pause();
    }
    this.resume();
    for (let out = buffer.take(); out !== undefined; out = buffer.take()) {
      const full = moveOut(out);
      if (full !== undefined) {
        this.pause();
        yield full;
        this.resume();
      }
    }
    this.pause();
    const rest = fill.rest();
    if (rest !== undefined) yield rest;
  }

  /**
   * The task's chunks that hold records, read and checked, in order; each is read while the one
   * before is in use (one chunk ahead), so its read and decompression overlap training. A read
   * that fails is reported when its chunk is reached.
   */
  private async *checkedChunks(chunks: readonly TaskChunk[]): AsyncGenerator<CheckedRecords> {
    const early = this.early;
    this.early = undefined;
    const readAhead = (i: number): Promise<CheckedRecords | undefined> | undefined => {
      if (i >= chunks.length) return undefined;
      if (i === 0 && early !== undefined && sameChunk(early.chunk, chunks[0]!)) return early.read;
      const read = this.readChecked(chunks[i]!);
      read.catch(() => undefined);
      return read;
    };
    let ahead = readAhead(0);
    for (let i = 0; ahead !== undefined; i++) {
      const checked = await ahead;
      ahead = readAhead(i + 1);
      if (checked !== undefined) yield checked;
    }
  }

  /**
   * A chunk's records, read and checked, or kept from an earlier read of the chunk (each
   * epoch's tasks name the same chunks); its record count is held against the task's either way.
   */
  private async readChecked(chunk: TaskChunk): Promise<CheckedRecords | undefined> {
    const checked = await this.cache.get(`${chunk.offset}@${chunk.file}`, () => this.readAndCheck(chunk));
    const count = checked?.records.length ?? 0;
    if (count !== chunk.numRecords) {
      throw new TaskDataError(
        chunk.file,
        chunk.offset,
        `holds ${count} records but the task says ${chunk.numRecords}; was the file rewritten?`,
      );
    }
    return checked;
  }

  private async readAndCheck(chunk: TaskChunk): Promise<CheckedRecords | undefined> {
    let records: Uint8Array[];
    try {
      records = (await this.readChunk(chunk.file, chunk.offset)).records;
    } catch (err) {
      if (err instanceof ChunkError) throw err;
      throw new TaskDataError(chunk.file, chunk.offset, (err as Error).message, { cause: err });
    }
    if (records.length === 0) return undefined;
    try {
      return checkRecords(records, this.options.layout);
    } catch (err) {
      throw new TaskDataError(chunk.file, chunk.offset, (err as Error).message, { cause: err });
    }
  }
}

/** The memory a chunk's checked records keep alive: the buffers they lie in, and their index. */
function checkedBytes(checked: CheckedRecords | undefined): number {
  if (checked === undefined) return 0;
  const buffers = new Set<ArrayBufferLike>(checked.records.map((record) => record.buffer));
  let bytes = checked.featuresOffsets.byteLength + checked.labels.byteLength;
  for (const buffer of buffers) bytes += buffer.byteLength;
  return bytes;
}
