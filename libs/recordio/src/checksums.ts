import CRC32C from 'crc-32/crc32c.js';

/** CRC-32C (Castagnoli) of `data`, as an unsigned 32-bit integer. */
export function crc32c(data: Uint8Array): number {
  return CRC32C.buf(data, 0) >>> 0;
}

/**
 * The snappy framing format's masked CRC-32C of `data`: rotated right by 15 bits, plus 0xa282ead8,
 * the constant of the framing specification (and of LevelDB's `crc32c::Mask`).
 */
export function maskedCrc32c(data: Uint8Array): number {
  const c = crc32c(data);
  return ((((c >>> 15) | (c << 17)) >>> 0) + 0xa282ead8) >>> 0;
}
