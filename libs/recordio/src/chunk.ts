/**
 * Encoding and decoding one chunk: a 20-byte header followed by the (optionally compressed)
 * payload, which is each record's length as uint32 little-endian followed by its bytes.
 */
import zlib from 'node:zlib';
import { crc32 } from '#libs/file-integrity';
import { type ChunkHeader, HEADER_SIZE_BYTES, writeChunkHeader } from './chunk-header.js';
import { Compressor } from './compressor.js';
import { type ChunkLocation, ChecksumMismatchError, CorruptChunkError } from './errors.js';
import { decodeSnappyFrames, encodeSnappyFrames } from './snappy-framing.js';

/** Size of the length prefix before each record in a payload. */
export const RECORD_LENGTH_SIZE_BYTES = 4;

/** Largest payload or record a chunk can describe: its sizes are uint32 fields. */
export const MAX_PAYLOAD_SIZE_BYTES = 0xffffffff;

/**
 * Turns an uncompressed payload into a finished chunk. `buffer` holds `HEADER_SIZE_BYTES` spare
 * bytes followed by the payload; without compression the header is written into those spare bytes
 * and the same memory is returned, otherwise a new buffer holds the header and compressed payload.
 */
export function sealChunk(buffer: Uint8Array, numRecords: number, compressor: Compressor): Uint8Array {
  const raw = buffer.subarray(HEADER_SIZE_BYTES);
  let chunk: Uint8Array;
  switch (compressor) {
    case Compressor.None:
      chunk = buffer;
      break;
    case Compressor.Snappy:
      chunk = encodeSnappyFrames(raw, HEADER_SIZE_BYTES);
      break;
    case Compressor.Gzip: {
      const gz = zlib.gzipSync(raw);
      chunk = new Uint8Array(HEADER_SIZE_BYTES + gz.length);
      chunk.set(gz, HEADER_SIZE_BYTES);
      break;
    }
    default:
      throw new RangeError(`unknown RecordIO compressor ${String(compressor)} (expected 0 none, 1 snappy or 2 gzip)`);
  }
  const payload = chunk.subarray(HEADER_SIZE_BYTES);
  if (payload.length > MAX_PAYLOAD_SIZE_BYTES) {
    throw new RangeError(
      `a RecordIO chunk payload of ${payload.length} bytes exceeds the ${MAX_PAYLOAD_SIZE_BYTES}-byte limit`,
    );
  }
  writeChunkHeader(chunk, 0, { checksum: crc32(payload), compressor, compressedSize: payload.length, numRecords });
  return chunk;
}

/**
 * Encodes `records` as one complete chunk (header and payload), exactly as the writer would when
 * they all fit in one chunk. An empty list is refused: the format never holds an empty chunk.
 */
export function encodeChunk(records: readonly Uint8Array[], compressor: Compressor): Uint8Array {
  if (records.length === 0) throw new RangeError('a RecordIO chunk needs at least one record');
  let size = HEADER_SIZE_BYTES;
  for (const record of records) size += RECORD_LENGTH_SIZE_BYTES + record.length;
  const buffer = new Uint8Array(size);
  const view = new DataView(buffer.buffer);
  let at = HEADER_SIZE_BYTES;
  for (const record of records) {
    view.setUint32(at, record.length, true);
    buffer.set(record, at + RECORD_LENGTH_SIZE_BYTES);
    at += RECORD_LENGTH_SIZE_BYTES + record.length;
  }
  return sealChunk(buffer, records.length, compressor);
}

/** Splits an uncompressed payload into `numRecords` records, views into `raw`. */
function splitRecords(raw: Uint8Array, numRecords: number, location: ChunkLocation): Uint8Array[] {
  if (numRecords > raw.length / RECORD_LENGTH_SIZE_BYTES) {
    throw new CorruptChunkError(
      location,
      `${numRecords} records cannot fit in an uncompressed payload of ${raw.length} bytes`,
    );
  }
  const view = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
  const records: Uint8Array[] = [];
  const end = raw.length;
  let at = 0;
  for (let i = 0; i < numRecords; i++) {
    if (at + RECORD_LENGTH_SIZE_BYTES > end) {
      throw new CorruptChunkError(location, `the payload ends before the length of record ${i} of ${numRecords}`);
    }
    const length = view.getUint32(at, true);
    at += RECORD_LENGTH_SIZE_BYTES;
    if (length > end - at) {
      throw new CorruptChunkError(location, `record ${i} of ${numRecords} (${length} bytes) overruns the payload`);
    }
    records.push(raw.subarray(at, at + length));
    at += length;
  }
  if (at !== end) {
    throw new CorruptChunkError(
      location,
      `${end - at} bytes follow the last of the ${numRecords} records the header counts`,
    );
  }
  return records;
}

/** Undoes the chunk's compression, reporting any failure as a `CorruptChunkError`. */
function decompress(payload: Uint8Array, compressor: Compressor, location: ChunkLocation): Uint8Array {
  switch (compressor) {
    case Compressor.None:
      return payload;
    case Compressor.Snappy:
      try {
        return decodeSnappyFrames(payload);
      } catch (cause) {
        throw new CorruptChunkError(location, `bad snappy payload: ${(cause as Error).message}`, { cause });
      }
    case Compressor.Gzip:
      try {
        return zlib.gunzipSync(payload);
      } catch (cause) {
        throw new CorruptChunkError(location, `bad gzip payload: ${(cause as Error).message}`, { cause });
      }
  }
}

/**
 * Verifies a chunk's payload against its header and decodes its records. The records are views
 * into the decompressed payload (into `payload` itself when the chunk is not compressed).
 * @throws ChecksumMismatchError when the payload's CRC-32 differs from the header's.
 * @throws CorruptChunkError when the payload cannot be decompressed or split into records.
 */
export function decodeChunkPayload(header: ChunkHeader, payload: Uint8Array, location: ChunkLocation): Uint8Array[] {
  const computed = crc32(payload);
  if (computed !== header.checksum) throw new ChecksumMismatchError(location, header.checksum, computed);
  return splitRecords(decompress(payload, header.compressor, location), header.numRecords, location);
}
