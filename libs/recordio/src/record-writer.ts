/** Writing records to a RecordIO file, chunk by chunk. */
import fs from 'node:fs';
import { type FileHandle, open } from 'node:fs/promises';
import type { Writable } from 'node:stream';
import { promisify } from 'node:util';
import { HEADER_SIZE_BYTES } from './chunk-header.js';
import { MAX_PAYLOAD_SIZE_BYTES, RECORD_LENGTH_SIZE_BYTES, sealChunk } from './chunk.js';
import { Compressor, DEFAULT_COMPRESSOR, isCompressor } from './compressor.js';
import { WriterClosedError } from './errors.js';

/**
 * Default chunk size: a new chunk starts when the record bytes of the current one (before
 * compression, not counting length prefixes) would exceed it. The Go package's default.
 */
export const RECORDIO_MAX_CHUNK_SIZE_BYTES = 32 * 1024 * 1024;

/** Initial capacity of the buffer a chunk is gathered in; it grows as records arrive. */
const INITIAL_CHUNK_BUFFER_BYTES = 64 * 1024;

/** Options of {@link RecordWriter}. */
export interface RecordWriterOptions {
  /**
   * Most record bytes in one chunk, before compression and without length prefixes; a record
   * larger than this gets a chunk of its own. Default {@link RECORDIO_MAX_CHUNK_SIZE_BYTES} (32 MiB).
   */
  readonly maxChunkSizeBytes?: number;
  /** How chunks are compressed. Default `Compressor.Snappy`, as in the Go package. */
  readonly compressor?: Compressor;
}

/**
 * Where a writer puts its chunks: a file path (created or truncated, closed by `close()`), an
 * open file descriptor (left open), or a Node `Writable` (left open; not ended).
 */
export type RecordSink = string | number | Writable;

interface ByteSink {
  write(bytes: Uint8Array): Promise<void>;
  close(): Promise<void>;
}

const writeToFd = promisify(fs.write);

function fileSink(handle: FileHandle): ByteSink {
  return {
    async write(bytes) {
      for (let done = 0; done < bytes.length;) {
        const { bytesWritten } = await handle.write(bytes, done, bytes.length - done);
        done += bytesWritten;
      }
    },
    close: () => handle.close(),
  };
}

function fdSink(fd: number): ByteSink {
  return {
    async write(bytes) {
      for (let done = 0; done < bytes.length;) {
        const { bytesWritten } = await writeToFd(fd, bytes, done, bytes.length - done);
        done += bytesWritten;
      }
    },
    close: async () => undefined,
  };
}

function streamSink(stream: Writable): ByteSink {
  return {
    write: (bytes) =>
      new Promise<void>((resolve, reject) => {
        stream.write(bytes, (error) => (error ? reject(error) : resolve()));
      }),
    close: async () => undefined,
  };
}

async function openSink(target: RecordSink): Promise<ByteSink> {
  if (typeof target === 'string') return fileSink(await open(target, 'w'));
  if (typeof target === 'number') return fdSink(target);
  return streamSink(target);
}

/**
 * Writes records into RecordIO chunks, byte-compatible with PaddlePaddle's Go `recordio` writer.
 * Records are copied as they are written, so the caller may reuse its buffers. A chunk is
 * compressed and handed to the sink when the next record would overflow it, and on `close()`.
 *
 * ```ts
 * const writer = await RecordWriter.open('train-00000.recordio', { compressor: Compressor.Snappy });
 * for (const example of examples) await writer.write(example);
 * await writer.close();
 * ```
 */
export class RecordWriter {
  private readonly maxChunkSizeBytes: number;
  private readonly compressor: Compressor;
  private buffer: Uint8Array;
  private view: DataView;
  private used = HEADER_SIZE_BYTES;
  private bytesInChunk = 0;
  private recordsInChunk = 0;
  private tail: Promise<void> = Promise.resolve();
  private failure: unknown;
  private closed = false;
  private written = { bytes: 0, chunks: 0, records: 0 };

  private constructor(
    private readonly sink: ByteSink,
    settings: { readonly maxChunkSizeBytes: number; readonly compressor: Compressor },
  ) {
    this.maxChunkSizeBytes = settings.maxChunkSizeBytes;
    this.compressor = settings.compressor;
    this.buffer = Buffer.allocUnsafe(INITIAL_CHUNK_BUFFER_BYTES);
    this.view = new DataView(this.buffer.buffer, this.buffer.byteOffset, this.buffer.byteLength);
  }

  /** Opens a writer on `target`: a file path, a file descriptor, or a `Writable`. */
  static async open(target: RecordSink, options: RecordWriterOptions = {}): Promise<RecordWriter> {
    const maxChunkSizeBytes = options.maxChunkSizeBytes ?? RECORDIO_MAX_CHUNK_SIZE_BYTES;
    if (!Number.isSafeInteger(maxChunkSizeBytes) || maxChunkSizeBytes < 0) {
      throw new RangeError(`maxChunkSizeBytes must be a non-negative integer, got ${maxChunkSizeBytes}`);
    }
    const compressor = options.compressor ?? DEFAULT_COMPRESSOR;
    if (!isCompressor(compressor)) {
      throw new RangeError(`unknown RecordIO compressor ${String(compressor)} (expected 0 none, 1 snappy or 2 gzip)`);
    }
    return new RecordWriter(await openSink(target), { maxChunkSizeBytes, compressor });
  }

  /** Bytes handed to the sink so far (headers and payloads). */
  get bytesWritten(): number {
    return this.written.bytes;
  }

  /** Chunks handed to the sink so far. */
  get chunksWritten(): number {
    return this.written.chunks;
  }

  /** Records in the chunks handed to the sink so far. */
  get recordsWritten(): number {
    return this.written.records;
  }

  /**
   * Adds one record. The returned promise settles once any chunk this record completed has been
   * written; awaiting it gives back-pressure. Calls made without awaiting still keep their order.
   * @throws WriterClosedError after `close()`; the sink's error if an earlier write failed.
   */
  write(record: Uint8Array): Promise<void> {
    if (this.closed) return Promise.reject(new WriterClosedError());
    if (this.failure !== undefined) return Promise.reject(this.failure);
    if (!(record instanceof Uint8Array)) {
      return Promise.reject(new TypeError('a RecordIO record must be a Uint8Array'));
    }
    if (this.recordsInChunk > 0 && this.bytesInChunk + record.length > this.maxChunkSizeBytes) {
      this.flushChunk();
    }
    const needed = this.used + RECORD_LENGTH_SIZE_BYTES + record.length;
    if (needed - HEADER_SIZE_BYTES > MAX_PAYLOAD_SIZE_BYTES) {
      return Promise.reject(new RangeError(`a record of ${record.length} bytes does not fit in a RecordIO chunk`));
    }
    if (needed > this.buffer.length) this.grow(needed);
    this.view.setUint32(this.used, record.length, true);
    this.buffer.set(record, this.used + RECORD_LENGTH_SIZE_BYTES);
    this.used = needed;
    this.bytesInChunk += record.length;
    this.recordsInChunk += 1;
    return this.tail;
  }

  /**
   * Writes the last chunk, waits for every chunk to reach the sink, and closes a file the writer
   * opened. Calling it again does nothing.
   */
  async close(): Promise<void> {
    if (this.closed) return this.tail;
    this.closed = true;
    if (this.recordsInChunk > 0 && this.failure === undefined) this.flushChunk();
    this.buffer = new Uint8Array(0);
    try {
      await this.tail;
    } finally {
      await this.sink.close();
    }
  }

  private grow(needed: number): void {
    const bigger = Buffer.allocUnsafe(
      Math.max(needed, Math.min(this.buffer.length * 2, needed + this.maxChunkSizeBytes)),
    );
    bigger.set(this.buffer.subarray(0, this.used));
    this.buffer = bigger;
    this.view = new DataView(bigger.buffer, bigger.byteOffset, bigger.byteLength);
  }

  /** Seals the current chunk, queues it for the sink, and starts a new buffer. */
  private flushChunk(): void {
    const records = this.recordsInChunk;
    const chunk = sealChunk(this.buffer.subarray(0, this.used), records, this.compressor);
    // The chunk may share memory with the buffer (no compression), so the next chunk gets its own.
    const capacity = Math.min(
      this.buffer.length,
      Math.max(INITIAL_CHUNK_BUFFER_BYTES, 2 * (this.maxChunkSizeBytes + HEADER_SIZE_BYTES)),
    );
    this.buffer = Buffer.allocUnsafe(capacity);
    this.view = new DataView(this.buffer.buffer, this.buffer.byteOffset, this.buffer.byteLength);
    this.used = HEADER_SIZE_BYTES;
    this.bytesInChunk = 0;
    this.recordsInChunk = 0;
    const written = this.tail.then(() => this.sink.write(chunk));
    this.tail = written.then(() => {
      this.written.bytes += chunk.length;
      this.written.chunks += 1;
      this.written.records += records;
    });
    this.tail.catch((error: unknown) => {
      this.failure ??= error;
    });
  }
}

/**
 * Writes `records` to `target` as a RecordIO file and closes the writer; returns the number of
 * records written.
 */
export async function writeRecordFile(
  target: RecordSink,
  records: Iterable<Uint8Array> | AsyncIterable<Uint8Array>,
  options: RecordWriterOptions = {},
): Promise<number> {
  const writer = await RecordWriter.open(target, options);
  try {
    for await (const record of records) await writer.write(record);
  } finally {
    await writer.close();
  }
  return writer.recordsWritten;
}
