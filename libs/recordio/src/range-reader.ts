/** Reading records by their index in a file, across chunk boundaries. */
import { type FileHandle, open } from 'node:fs/promises';
import { type ChunkIndex, type ChunkMeta, loadIndex } from './chunk-index.js';
import { type Chunk, readKnownChunkFromHandle } from './chunk-reader.js';

/** Index of the last chunk whose first record is at or before `record` (chunks sorted by it). */
function chunkHolding(chunks: readonly ChunkMeta[], record: number): number {
  let low = 0;
  let high = chunks.length - 1;
  while (low < high) {
    const mid = (low + high + 1) >>> 1;
    if (chunks[mid]!.firstRecord <= record) low = mid;
    else high = mid - 1;
  }
  return low;
}

/**
 * Reads ranges of records from one file through one open handle. It keeps the last chunk it
 * decoded, so reading consecutive small ranges decodes each chunk once.
 */
export class RangeReader {
  private cached: { readonly position: number; readonly chunk: Chunk } | undefined;

  private constructor(
    private readonly handle: FileHandle,
    /** The index of the file, used to find the chunks of a range. */
    readonly index: ChunkIndex,
  ) {}

  /**
   * Opens `file` for range reads, using `index` when given (it must describe this file as it is
   * now) and building it otherwise.
   */
  static async open(file: string, index?: ChunkIndex): Promise<RangeReader> {
    const resolved = index ?? (await loadIndex(file));
    const handle = await open(file, 'r');
    return new RangeReader(handle, resolved);
  }

  /** The file being read. */
  get file(): string {
    return this.index.file;
  }

  /** Number of records in the file. */
  get totalRecords(): number {
    return this.index.totalRecords;
  }

  /** Reads, verifies and decodes chunk number `position` (0-based) of the file. */
  async readChunk(position: number): Promise<Chunk> {
    if (this.cached?.position === position) return this.cached.chunk;
    const meta = this.index.chunks[position];
    if (meta === undefined) {
      throw new RangeError(`${this.file} has ${this.index.totalChunks} chunks; there is no chunk ${position}`);
    }
    const chunk = await readKnownChunkFromHandle(this.handle, this.file, meta.offset, meta);
    this.cached = { position, chunk };
    return chunk;
  }

  /**
   * Returns records `start` to `end - 1` of the file, in order, reading every chunk they span.
   * @throws RangeError unless `0 <= start <= end <= totalRecords`.
   */
  async read(start: number, end: number): Promise<Uint8Array[]> {
    const total = this.index.totalRecords;
    if (!Number.isInteger(start) || !Number.isInteger(end) || start < 0 || end < start || end > total) {
      throw new RangeError(`record range [${start}, ${end}) is not within the ${total} records of ${this.file}`);
    }
    const out: Uint8Array[] = [];
    if (start === end) return out;
    const chunks = this.index.chunks;
    for (let position = chunkHolding(chunks, start); position < chunks.length; position++) {
      const meta = chunks[position]!;
      if (meta.firstRecord >= end) break;
      if (meta.numRecords === 0) continue;
      const { records } = await this.readChunk(position);
      const from = Math.max(start - meta.firstRecord, 0);
      const to = Math.min(end - meta.firstRecord, records.length);
      for (let i = from; i < to; i++) out.push(records[i]!);
    }
    return out;
  }

  /** Closes the file; the reader cannot be used afterwards. */
  async close(): Promise<void> {
    this.cached = undefined;
    await this.handle.close();
  }
}

/**
 * Returns records `start` to `end - 1` of `file`, whose chunk index is `index`, reading only the
 * chunks that hold them.
 * @throws RangeError unless `0 <= start <= end <= index.totalRecords`.
 */
export async function readRecords(file: string, index: ChunkIndex, start: number, end: number): Promise<Uint8Array[]> {
  const reader = await RangeReader.open(file, index);
  try {
    return await reader.read(start, end);
  } finally {
    await reader.close();
  }
}
