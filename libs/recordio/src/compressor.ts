/**
 * Compression applied to a chunk's payload. The numeric ids are the ones stored in chunk headers
 * by PaddlePaddle's Go `recordio` package.
 */
export const Compressor = {
  /** The payload is stored as is. */
  None: 0,
  /** Snappy framing format: stream identifier, then frames with a masked CRC-32C each. */
  Snappy: 1,
  /** A gzip member (RFC 1952). */
  Gzip: 2,
} as const;

/** One of the compressor ids: 0 none, 1 snappy, 2 gzip. */
export type Compressor = (typeof Compressor)[keyof typeof Compressor];

/** The compressor the writer uses when none is given; the Go package's default too. */
export const DEFAULT_COMPRESSOR: Compressor = Compressor.Snappy;

const NAMES: Record<Compressor, string> = { 0: 'none', 1: 'snappy', 2: 'gzip' };

/** Whether `value` is a compressor id this library can read and write. */
export function isCompressor(value: number): value is Compressor {
  return value === Compressor.None || value === Compressor.Snappy || value === Compressor.Gzip;
}

/** The lower-case name of a compressor (`none`, `snappy`, `gzip`), for logs and the CLI. */
export function compressorName(compressor: Compressor): string {
  return NAMES[compressor];
}

/**
 * Parses a compressor given by name (`none`, `snappy`, `gzip`) or by id (`0`, `1`, `2`).
 * @throws RangeError when the value names no compressor.
 */
export function parseCompressor(value: string): Compressor {
  const text = value.trim().toLowerCase();
  for (const [id, name] of Object.entries(NAMES)) {
    if (text === name || text === id) return Number(id) as Compressor;
  }
  throw new RangeError(`unknown RecordIO compressor ${JSON.stringify(value)} (expected none, snappy or gzip)`);
}
