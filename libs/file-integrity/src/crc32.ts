import zlib from 'node:zlib';

/** CRC-32 (IEEE 802.3, as zlib's `crc32`) of `data`, as an unsigned 32-bit integer. */
export function crc32(data: Uint8Array): number {
  return zlib.crc32(data) >>> 0;
}
