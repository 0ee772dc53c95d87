/** The chunk index of one file, built from chunk headers alone. */
import { open } from 'node:fs/promises';
import { type ChunkHeader, HEADER_SIZE_BYTES, parseChunkHeader } from './chunk-header.js';
import { type Chunk, readKnownChunkFromHandle } from './chunk-reader.js';
import { TruncatedChunkError } from './errors.js';
import { readFully } from './file-reads.js';

/** Where one chunk lies in its file and which records it holds. */
export interface ChunkMeta extends ChunkHeader {
  /** Byte offset of the chunk's header in the file. */
  readonly offset: number;
  /** Index, within the file, of the chunk's first record. */
  readonly firstRecord: number;
}

/** All chunks of one file, in file order, with totals. */
export interface ChunkIndex {
  /** The file, as it was given to {@link loadIndex}. */
  readonly file: string;
  /** Size of the file when it was indexed. */
  readonly fileSizeBytes: number;
  /** The chunks, in file order. */
  readonly chunks: readonly ChunkMeta[];
  /** Number of chunks in the file. */
  readonly totalChunks: number;
  /** Number of records in the file. */
  readonly totalRecords: number;
}

/**
 * Builds the chunk index of `file` by reading each 20-byte header and seeking past its payload;
 * payloads are neither read nor verified (that happens when a chunk is read).
 * @throws BadMagicError, UnknownCompressorError, TruncatedChunkError naming the file and the
 *   offset of the bad chunk.
 */
export async function loadIndex(file: string): Promise<ChunkIndex> {
  const handle = await open(file, 'r');
  try {
    const { size } = await handle.stat();
    const chunks: ChunkMeta[] = [];
    const headerBytes = new Uint8Array(HEADER_SIZE_BYTES);
    let offset = 0;
    let totalRecords = 0;
    while (offset < size) {
      const location = { file, offset };
      const available = size - offset;
      if (available < HEADER_SIZE_BYTES)
        throw new TruncatedChunkError(location, 'header', HEADER_SIZE_BYTES, available);
      const read = await readFully(handle, headerBytes, offset);
      if (read < HEADER_SIZE_BYTES) throw new TruncatedChunkError(location, 'header', HEADER_SIZE_BYTES, read);
      const header = parseChunkHeader(headerBytes, location);
      const payloadAvailable = available - HEADER_SIZE_BYTES;
      if (header.compressedSize > payloadAvailable) {
        throw new TruncatedChunkError(location, 'payload', header.compressedSize, payloadAvailable);
      }
      chunks.push({ offset, firstRecord: totalRecords, ...header });
      totalRecords += header.numRecords;
      offset += HEADER_SIZE_BYTES + header.compressedSize;
    }
    return { file, fileSizeBytes: size, chunks, totalChunks: chunks.length, totalRecords };
  } finally {
    await handle.close();
  }
}

/**
 * Reads, verifies and decodes the chunk `meta` describes, in one read, checking that the header on
 * disk still matches the index.
 * @throws ChecksumMismatchError, CorruptChunkError, TruncatedChunkError and the other
 *   `ChunkError`s, naming the file and the chunk's offset.
 */
export async function readChunk(file: string, meta: ChunkHeader & { readonly offset: number }): Promise<Chunk> {
  const handle = await open(file, 'r');
  try {
    return await readKnownChunkFromHandle(handle, file, meta.offset, meta);
  } finally {
    await handle.close();
  }
}
