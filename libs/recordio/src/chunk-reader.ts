/** Reading one chunk from a file: header, payload, checksum, decompression, records. */
import { type FileHandle, open } from 'node:fs/promises';
import { decodeChunkPayload } from './chunk.js';
import { type ChunkHeader, HEADER_SIZE_BYTES, parseChunkHeader } from './chunk-header.js';
import { CorruptChunkError, TruncatedChunkError } from './errors.js';
import { readFully } from './file-reads.js';

/** A decoded chunk: where it lies, its header fields, and its records in order. */
export interface Chunk extends ChunkHeader {
  /** The file it was read from. */
  readonly file: string;
  /** Byte offset of its header in the file. */
  readonly offset: number;
  /**
   * The records, in file order. They are views sharing the memory of the chunk's decoded
   * payload; copy one (`record.slice()`) to keep it without keeping the whole chunk alive.
   */
  readonly records: Uint8Array[];
}

/** A chunk's header and undecoded payload, as read from disk. */
export interface RawChunk {
  /** Byte offset of the header in the file. */
  readonly offset: number;
  /** The parsed header. */
  readonly header: ChunkHeader;
  /** The payload as stored, still compressed. */
  readonly payload: Uint8Array;
}

/** Byte offset of the chunk after the one at `offset` with the given header. */
export function nextChunkOffset(offset: number, header: ChunkHeader): number {
  return offset + HEADER_SIZE_BYTES + header.compressedSize;
}

/**
 * Reads the header and payload of the chunk at `offset` through an open handle, or returns null
 * when `offset` is exactly the end of the file and `endOk` is set.
 * @throws TruncatedChunkError when the file ends inside the header or the payload.
 * @throws BadMagicError, UnknownCompressorError when the header is not valid.
 */
export async function readRawChunk(
  handle: FileHandle,
  file: string,
  offset: number,
  endOk = false,
): Promise<RawChunk | null> {
  const location = { file, offset };
  const headerBytes = new Uint8Array(HEADER_SIZE_BYTES);
  const headerRead = await readFully(handle, headerBytes, offset);
  if (headerRead === 0 && endOk) return null;
  if (headerRead < HEADER_SIZE_BYTES) {
    throw new TruncatedChunkError(location, 'header', HEADER_SIZE_BYTES, headerRead);
  }
  const header = parseChunkHeader(headerBytes, location);
  const payload = Buffer.allocUnsafe(header.compressedSize);
  const payloadRead = await readFully(handle, payload, offset + HEADER_SIZE_BYTES);
  if (payloadRead < header.compressedSize) {
    throw new TruncatedChunkError(location, 'payload', header.compressedSize, payloadRead);
  }
  return { offset, header, payload };
}

/** Verifies and decodes a chunk read by {@link readRawChunk}. */
export function decodeRawChunk(file: string, raw: RawChunk): Chunk {
  const records = decodeChunkPayload(raw.header, raw.payload, { file, offset: raw.offset });
  return { file, offset: raw.offset, ...raw.header, records };
}

/** Reads and decodes the chunk at `offset` through an open handle. */
export async function readChunkFromHandle(handle: FileHandle, file: string, offset: number): Promise<Chunk> {
  const raw = await readRawChunk(handle, file, offset);
  return decodeRawChunk(file, raw!);
}

/**
 * Reads a chunk whose header is already known (from an index) through an open handle, in a single
 * read, and checks that the header on disk still matches it.
 * @throws CorruptChunkError when the header on disk differs from `expected`.
 */
export async function readKnownChunkFromHandle(
  handle: FileHandle,
  file: string,
  offset: number,
  expected: ChunkHeader,
): Promise<Chunk> {
  const location = { file, offset };
  const bytes = Buffer.allocUnsafe(HEADER_SIZE_BYTES + expected.compressedSize);
  const read = await readFully(handle, bytes, offset);
  if (read < HEADER_SIZE_BYTES) throw new TruncatedChunkError(location, 'header', HEADER_SIZE_BYTES, read);
  const header = parseChunkHeader(bytes, location);
  if (
    header.checksum !== expected.checksum ||
    header.compressor !== expected.compressor ||
    header.compressedSize !== expected.compressedSize ||
    header.numRecords !== expected.numRecords
  ) {
    throw new CorruptChunkError(
      location,
      `header (${header.numRecords} records, ${header.compressedSize} bytes) does not match the index ` +
        `(${expected.numRecords} records, ${expected.compressedSize} bytes); was the file rewritten?`,
    );
  }
  if (read < bytes.length) {
    throw new TruncatedChunkError(location, 'payload', header.compressedSize, read - HEADER_SIZE_BYTES);
  }
  return decodeRawChunk(file, { offset, header, payload: bytes.subarray(HEADER_SIZE_BYTES) });
}

/**
 * Reads, verifies and decodes the chunk whose header starts at byte `offset` of `file`. This is
 * how a trainer reads the chunk a task names by `(file, offset)`.
 * @throws BadMagicError, ChecksumMismatchError, UnknownCompressorError, TruncatedChunkError,
 *   CorruptChunkError — each naming the file and the offset.
 */
export async function readChunkAt(file: string, offset: number): Promise<Chunk> {
  const handle = await open(file, 'r');
  try {
    return await readChunkFromHandle(handle, file, offset);
  } finally {
    await handle.close();
  }
}
