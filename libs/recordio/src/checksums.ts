import CRC32C from 'crc-32/crc32c.js';
import { wasmSnappy } from './wasm/snappy-wasm.js';

/**
 * CRC-32C (Castagnoli) of `data`, as an unsigned 32-bit integer: in WebAssembly where it loads,
 * else in plain JavaScript.
 */
export function crc32c(data: Uint8Array): number {
  const fast = wasmSnappy();
  return fast ? fast.crc32c(data) : CRC32C.buf(data, 0) >>> 0;
}

/**
 * Masks a CRC-32C as the snappy framing format stores it: rotated right by 15 bits, plus
 * 0xa282ead8, the constant of the framing specification (and of LevelDB's `crc32c::Mask`).
 */
export function maskCrc32c(crc: number): number {
  return ((((crc >>> 15) | (crc << 17)) >>> 0) + 0xa282ead8) >>> 0;
}

/** The snappy framing format's masked CRC-32C of `data` (see {@link maskCrc32c}). */
export function maskedCrc32c(data: Uint8Array): number {
  return maskCrc32c(crc32c(data));
}
