/**
 * The snappy framing format (https://github.com/google/snappy/blob/main/framing_format.txt), as
 * written by Go's `snappy.NewBufferedWriter`: a stream identifier, then frames of at most 64 KiB
 * of uncompressed data, each with the masked CRC-32C of its uncompressed bytes. Frames are decoded
 * and checksummed in WebAssembly (`wasm/snappy.wat`) where it loads, else with snappyjs and crc-32.
 */
import snappy from 'snappyjs';
import snappyDecompressor from 'snappyjs/snappy_decompressor.js';
import { maskCrc32c, maskedCrc32c } from './checksums.js';
import { wasmSnappy } from './wasm/snappy-wasm.js';

/** Largest amount of uncompressed data in one frame. */
export const SNAPPY_MAX_BLOCK_SIZE_BYTES = 65536;

const STREAM_IDENTIFIER = Uint8Array.of(0xff, 0x06, 0x00, 0x00, 0x73, 0x4e, 0x61, 0x50, 0x70, 0x59);
const FRAME_HEADER_SIZE_BYTES = 4;
const FRAME_CHECKSUM_SIZE_BYTES = 4;
const TYPE_COMPRESSED = 0x00;
const TYPE_UNCOMPRESSED = 0x01;
const TYPE_PADDING = 0xfe;
const TYPE_STREAM_IDENTIFIER = 0xff;
const FIRST_SKIPPABLE_TYPE = 0x80;
const { SnappyDecompressor } = snappyDecompressor;

/** A snappy stream that cannot be decoded; the chunk reader wraps it into a `CorruptChunkError`. */
export class SnappyFramingError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'SnappyFramingError';
  }
}

/**
 * Encodes `data` as a framed snappy stream and returns it after `headroomBytes` unused bytes, so
 * a caller can put a header in front without copying. A frame keeps its data uncompressed when
 * compression saves less than an eighth, the rule of Go's writer, which makes small payloads
 * byte-identical to the Go package's.
 */
export function encodeSnappyFrames(data: Uint8Array, headroomBytes = 0): Uint8Array {
  const frames: { type: number; checksum: number; body: Uint8Array }[] = [];
  let total = headroomBytes + STREAM_IDENTIFIER.length;
  for (let start = 0; start < data.length; start += SNAPPY_MAX_BLOCK_SIZE_BYTES) {
    const block = data.subarray(start, Math.min(start + SNAPPY_MAX_BLOCK_SIZE_BYTES, data.length));
    const compressed = snappy.compress(block);
    const keepRaw = compressed.length >= block.length - Math.floor(block.length / 8);
    const body = keepRaw ? block : compressed;
    frames.push({ type: keepRaw ? TYPE_UNCOMPRESSED : TYPE_COMPRESSED, checksum: maskedCrc32c(block), body });
    total += FRAME_HEADER_SIZE_BYTES + FRAME_CHECKSUM_SIZE_BYTES + body.length;
  }
  const out = new Uint8Array(total);
  const view = new DataView(out.buffer);
  out.set(STREAM_IDENTIFIER, headroomBytes);
  let at = headroomBytes + STREAM_IDENTIFIER.length;
  for (const frame of frames) {
    const length = FRAME_CHECKSUM_SIZE_BYTES + frame.body.length;
    view.setUint32(at, frame.type | (length << 8), true);
    view.setUint32(at + FRAME_HEADER_SIZE_BYTES, frame.checksum, true);
    out.set(frame.body, at + FRAME_HEADER_SIZE_BYTES + FRAME_CHECKSUM_SIZE_BYTES);
    at += FRAME_HEADER_SIZE_BYTES + length;
  }
  return out;
}

/** Reads the varint that starts a snappy block: its uncompressed length, or -1 if malformed. */
function blockUncompressedLength(block: Uint8Array): number {
  let result = 0;
  for (let i = 0, shift = 0; i < block.length && shift < 32; i++, shift += 7) {
    const byte = block[i]!;
    result += (byte & 0x7f) * 2 ** shift;
    if (byte < 0x80) return result;
  }
  return -1;
}

interface DataFrame {
  readonly compressed: boolean;
  readonly checksum: number;
  readonly body: Uint8Array;
  readonly uncompressedLength: number;
  readonly at: number;
}

/** Walks the frames of `stream`, checking their structure, and lists the ones that carry data. */
function listDataFrames(stream: Uint8Array): DataFrame[] {
  const frames: DataFrame[] = [];
  const view = new DataView(stream.buffer, stream.byteOffset, stream.byteLength);
  let sawIdentifier = false;
  let at = 0;
  while (at < stream.length) {
    if (at + FRAME_HEADER_SIZE_BYTES > stream.length) {
      throw new SnappyFramingError(`frame header at byte ${at} of the snappy stream is cut short`);
    }
    const word = view.getUint32(at, true);
    const type = word & 0xff;
    const length = word >>> 8;
    const bodyStart = at + FRAME_HEADER_SIZE_BYTES;
    if (bodyStart + length > stream.length) {
      throw new SnappyFramingError(`frame at byte ${at} of the snappy stream overruns it (length ${length})`);
    }
    if (type === TYPE_STREAM_IDENTIFIER) {
      const identifier = stream.subarray(at, bodyStart + length);
      if (
        length !== STREAM_IDENTIFIER.length - FRAME_HEADER_SIZE_BYTES ||
        !identifier.every((b, i) => b === STREAM_IDENTIFIER[i])
      ) {
        throw new SnappyFramingError(`bad snappy stream identifier at byte ${at}`);
      }
      sawIdentifier = true;
    } else if (!sawIdentifier) {
      throw new SnappyFramingError('the snappy stream does not start with a stream identifier');
    } else if (type === TYPE_COMPRESSED || type === TYPE_UNCOMPRESSED) {
      if (length < FRAME_CHECKSUM_SIZE_BYTES) {
        throw new SnappyFramingError(`frame at byte ${at} of the snappy stream is too short for its checksum`);
      }
      const body = stream.subarray(bodyStart + FRAME_CHECKSUM_SIZE_BYTES, bodyStart + length);
      const compressed = type === TYPE_COMPRESSED;
      const uncompressedLength = compressed ? blockUncompressedLength(body) : body.length;
      if (uncompressedLength < 0 || uncompressedLength > SNAPPY_MAX_BLOCK_SIZE_BYTES) {
        throw new SnappyFramingError(`frame at byte ${at} of the snappy stream has a bad uncompressed length`);
      }
      frames.push({ compressed, checksum: view.getUint32(bodyStart, true), body, uncompressedLength, at });
    } else if (type !== TYPE_PADDING && type < FIRST_SKIPPABLE_TYPE) {
      throw new SnappyFramingError(
        `reserved unskippable frame type 0x${type.toString(16)} at byte ${at} of the snappy stream`,
      );
    }
    // Padding (0xfe) and reserved skippable frames (0x80-0xfd) carry nothing to decode.
    at = bodyStart + length;
  }
  if (!sawIdentifier && stream.length > 0) {
    throw new SnappyFramingError('the snappy stream does not start with a stream identifier');
  }
  return frames;
}

/**
 * Decodes one frame's body with snappyjs into `block` and returns its masked CRC-32C.
 * @throws SnappyFramingError when snappyjs finds the block malformed.
 */
function decodeFrameInJs(frame: DataFrame, block: Uint8Array): number {
  if (frame.compressed) {
    // Decoding straight into the output spares a copy; writes past the view's end are dropped,
    // and a block that decodes to the wrong bytes fails the checksum.
    const decompressor = new SnappyDecompressor(frame.body);
    if (decompressor.readUncompressedLength() !== block.length || !decompressor.uncompressToBuffer(block)) {
      throw new SnappyFramingError(`bad snappy block in frame at byte ${frame.at} of the snappy stream`);
    }
  } else {
    block.set(frame.body);
  }
  return maskedCrc32c(block);
}

/**
 * Decodes a framed snappy stream, verifying each frame's CRC-32C.
 * @throws SnappyFramingError when the stream is malformed or a frame's checksum does not match.
 */
export function decodeSnappyFrames(stream: Uint8Array): Uint8Array {
  const frames = listDataFrames(stream);
  let total = 0;
  for (const frame of frames) total += frame.uncompressedLength;
  const out = Buffer.allocUnsafe(total);
  const fast = wasmSnappy();
  let at = 0;
  for (const frame of frames) {
    const block = out.subarray(at, at + frame.uncompressedLength);
    const crc = fast ? fast.decodeFrameBody(frame.body, frame.compressed, block) : -1;
    // A block the WebAssembly decoder refuses goes through snappyjs again, so that a corrupt
    // stream fails exactly as it always has (snappyjs lets some damage through to the checksum).
    const checksum = crc >= 0 ? maskCrc32c(crc) : decodeFrameInJs(frame, block);
    if (checksum !== frame.checksum) {
      throw new SnappyFramingError(
        `CRC-32C mismatch in frame at byte ${frame.at} of the snappy stream ` +
          `(stored 0x${frame.checksum.toString(16).padStart(8, '0')}, computed 0x${checksum.toString(16).padStart(8, '0')})`,
      );
    }
    at += block.length;
  }
  return out;
}
