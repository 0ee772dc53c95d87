/**
 * Errors raised by the RecordIO reader and writer. Every error about the contents of a file names
 * the file and the byte offset of the chunk it concerns, so a bad dataset can be found and fixed.
 */

/** Formats a 32-bit value as `0x` followed by eight hex digits. */
function hex32(value: number): string {
  return `0x${(value >>> 0).toString(16).padStart(8, '0')}`;
}

/** Base class of every error raised by `#libs/recordio`. */
export class RecordIOError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** Where a chunk-level error happened: the file and the byte offset of the chunk in it. */
export interface ChunkLocation {
  /** The file, as it was given to the reader. */
  readonly file: string;
  /** Byte offset of the chunk's header in the file. */
  readonly offset: number;
}

/** Base class of the errors about one chunk of a file; carries the file and the chunk's offset. */
export class ChunkError extends RecordIOError {
  /** The file, as it was given to the reader. */
  readonly file: string;
  /** Byte offset of the chunk's header in the file. */
  readonly offset: number;

  constructor(location: ChunkLocation, what: string, options?: ErrorOptions) {
    super(`${location.file}: ${what}`, options);
    this.file = location.file;
    this.offset = location.offset;
  }
}

/** The four bytes where a chunk should start do not hold the magic number `0x01020304`. */
export class BadMagicError extends ChunkError {
  /** The value found instead of the magic number. */
  readonly found: number;

  constructor(location: ChunkLocation, found: number, options?: ErrorOptions) {
    super(
      location,
      // The bytes found stay out of the message: it may reach whoever named the file, and must not
      // show them what a file that is not RecordIO holds.
      `bad magic number in chunk at byte ${location.offset} (expected 0x01020304): not a RecordIO chunk`,
      options,
    );
    this.found = found >>> 0;
  }
}

/** The CRC-32 of a chunk's payload differs from the one stored in its header. */
export class ChecksumMismatchError extends ChunkError {
  /** The checksum stored in the chunk header. */
  readonly stored: number;
  /** The checksum computed from the payload read from the file. */
  readonly computed: number;

  constructor(location: ChunkLocation, stored: number, computed: number, options?: ErrorOptions) {
    super(
      location,
      `checksum mismatch in chunk at byte ${location.offset} (stored ${hex32(stored)}, computed ${hex32(computed)})`,
      options,
    );
    this.stored = stored >>> 0;
    this.computed = computed >>> 0;
  }
}

/** A chunk header names a compressor other than none (0), snappy (1) or gzip (2). */
export class UnknownCompressorError extends ChunkError {
  /** The compressor id found in the header. */
  readonly compressor: number;

  constructor(location: ChunkLocation, compressor: number, options?: ErrorOptions) {
    super(
      location,
      `unknown compressor ${compressor} in chunk at byte ${location.offset} (known: 0 none, 1 snappy, 2 gzip)`,
      options,
    );
    this.compressor = compressor;
  }
}

/** Which part of a chunk the file ends inside. */
export type TruncatedPart = 'header' | 'payload';

/** The file ends inside a chunk's header or inside its payload. */
export class TruncatedChunkError extends ChunkError {
  /** Whether the file ends inside the header or inside the payload. */
  readonly part: TruncatedPart;
  /** Bytes that part needs. */
  readonly expectedBytes: number;
  /** Bytes of that part present in the file. */
  readonly availableBytes: number;

  constructor(
    location: ChunkLocation,
    part: TruncatedPart,
    expectedBytes: number,
    availableBytes: number,
    options?: ErrorOptions,
  ) {
    super(
      location,
      `truncated chunk ${part} in chunk at byte ${location.offset} (needs ${expectedBytes} bytes, file has ${availableBytes})`,
      options,
    );
    this.part = part;
    this.expectedBytes = expectedBytes;
    this.availableBytes = availableBytes;
  }
}

/**
 * A chunk whose outer checksum matched but whose contents cannot be decoded: a broken snappy frame
 * or frame checksum, bad gzip data, record lengths that overrun the payload, a record count that
 * disagrees with the header, or a header that disagrees with the index it was looked up in.
 */
export class CorruptChunkError extends ChunkError {
  /** What is wrong, in a few words. */
  readonly reason: string;

  constructor(location: ChunkLocation, reason: string, options?: ErrorOptions) {
    super(location, `corrupt chunk at byte ${location.offset}: ${reason}`, options);
    this.reason = reason;
  }
}

/** A file pattern given to {@link expandPatterns} matched no file. */
export class NoMatchingFilesError extends RecordIOError {
  /** The pattern that matched nothing. */
  readonly pattern: string;

  constructor(pattern: string, options?: ErrorOptions) {
    super(`no RecordIO file matches the pattern ${JSON.stringify(pattern)}`, options);
    this.pattern = pattern;
  }
}

/** A record was written to a {@link RecordWriter} after `close()` was called. */
export class WriterClosedError extends RecordIOError {
  constructor(options?: ErrorOptions) {
    super('cannot write to a RecordIO writer that has been closed', options);
  }
}
