/** Types for the `snappyjs` package (Snappy block format, pure JavaScript). */
declare module 'snappyjs' {
  /** Compresses `data` into one Snappy block (no framing). */
  export function compress(data: Uint8Array): Uint8Array;
  /** Decompresses one Snappy block; throws when it is invalid or longer than `maxLength`. */
  export function uncompress(data: Uint8Array, maxLength?: number): Uint8Array;
}

/** Types for `snappyjs`'s block decompressor, which decodes into a caller's buffer. */
declare module 'snappyjs/snappy_decompressor.js' {
  /** Decodes one Snappy block. */
  export class SnappyDecompressor {
    constructor(compressed: Uint8Array);
    /** Reads the block's leading varint: its uncompressed length, or -1 when malformed. */
    readUncompressedLength(): number;
    /** Decodes the rest of the block into `out`; false when the block is malformed. */
    uncompressToBuffer(out: Uint8Array): boolean;
  }
}
