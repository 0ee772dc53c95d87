import { Compressor, isCompressor } from './compressor.js';
import { BadMagicError, type ChunkLocation, UnknownCompressorError } from './errors.js';

/** The number every chunk starts with, stored little-endian as `04 03 02 01`. */
export const MAGIC_NUMBER = 0x01020304;

/** Size of a chunk header: magic, checksum, compressor, compressed size, record count. */
export const HEADER_SIZE_BYTES = 20;

/** The fields of a chunk header after the magic number. */
export interface ChunkHeader {
  /** CRC-32 (IEEE) of the compressed payload. */
  readonly checksum: number;
  /** How the payload is compressed. */
  readonly compressor: Compressor;
  /** Size of the payload on disk, in bytes. */
  readonly compressedSize: number;
  /** Number of records in the chunk. */
  readonly numRecords: number;
}

/** Writes `header`, magic number first, into `target` at `at`. */
export function writeChunkHeader(target: Uint8Array, at: number, header: ChunkHeader): void {
  const view = new DataView(target.buffer, target.byteOffset + at, HEADER_SIZE_BYTES);
  view.setUint32(0, MAGIC_NUMBER, true);
  view.setUint32(4, header.checksum >>> 0, true);
  view.setUint32(8, header.compressor, true);
  view.setUint32(12, header.compressedSize, true);
  view.setUint32(16, header.numRecords, true);
}

/**
 * Parses the 20 header bytes at the start of `bytes`.
 * @throws BadMagicError when the magic number is wrong.
 * @throws UnknownCompressorError when the compressor id is not 0, 1 or 2.
 */
export function parseChunkHeader(bytes: Uint8Array, location: ChunkLocation): ChunkHeader {
  const view = new DataView(bytes.buffer, bytes.byteOffset, HEADER_SIZE_BYTES);
  const magic = view.getUint32(0, true);
  if (magic !== MAGIC_NUMBER) throw new BadMagicError(location, magic);
  const compressor = view.getUint32(8, true);
  if (!isCompressor(compressor)) throw new UnknownCompressorError(location, compressor);
  return {
    checksum: view.getUint32(4, true),
    compressor,
    compressedSize: view.getUint32(12, true),
    numRecords: view.getUint32(16, true),
  };
}
