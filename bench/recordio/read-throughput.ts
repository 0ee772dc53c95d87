/**
 * RecordIO read throughput: writes a file of ~800-byte records (uncompressed, then snappy), then
 * compares a plain sequential read of the file's bytes with reading every record through the
 * library. Run after `npm run build`:
 *
 *   node dist/bench/recordio/read-throughput.js [--size-mb 200] [--record-bytes 800] [--repeat 3] [--json]
 *
 * "vs plain" is the throughput of a method as a fraction of the plain read's on the same file; "file
 * MB/s" counts bytes on disk, "record MB/s" the record bytes delivered.
 */
import { mkdtemp, open, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import {
  Compressor,
  RecordWriter,
  compressorName,
  loadIndex,
  readChunkAt,
  scanChunks,
  scanRecords,
} from '#libs/recordio';

/** Size of each read in the plain sequential baseline. */
const PLAIN_READ_SIZE_BYTES = 1024 * 1024;
/** Distinct records the generator cycles through (more than one snappy block's worth). */
const RECORD_POOL_SIZE = 1024;
const BYTES_PER_MB = 1e6;

interface Measurement {
  readonly compressor: string;
  readonly method: string;
  readonly seconds: number;
  readonly fileMbPerSecond: number;
  readonly recordMbPerSecond: number;
  readonly recordsPerSecond: number;
  readonly ratioToPlain: number;
}

/**
 * Records shaped like a small grey-scale image: a label byte, then rows of pixels that are zero
 * outside a blob of noisy values, so snappy finds the zero runs and leaves the noise as literals.
 */
function recordPool(recordBytes: number): Uint8Array[] {
  let x = 2463534242;
  const next = (): number => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return x >>> 0;
  };
  const side = Math.max(1, Math.floor(Math.sqrt(recordBytes - 1)));
  return Array.from({ length: RECORD_POOL_SIZE }, () => {
    const record = new Uint8Array(recordBytes);
    record[0] = next() % 10;
    const centreRow = side / 2 + ((next() % 5) - 2);
    const centreCol = side / 2 + ((next() % 5) - 2);
    const radius = side * (0.25 + (next() % 100) / 1000);
    for (let i = 1; i < recordBytes; i++) {
      const row = Math.floor((i - 1) / side);
      const col = (i - 1) % side;
      const inside = (row - centreRow) ** 2 + (col - centreCol) ** 2 <= radius ** 2;
      record[i] = inside ? 1 + (next() % 255) : 0;
    }
    return record;
  });
}

async function writeDataset(
  file: string,
  compressor: Compressor,
  numRecords: number,
  pool: Uint8Array[],
): Promise<number> {
  const started = performance.now();
  const writer = await RecordWriter.open(file, { compressor });
  for (let i = 0; i < numRecords; i++) await writer.write(pool[i % pool.length]!);
  await writer.close();
  return (performance.now() - started) / 1000;
}

async function plainRead(file: string): Promise<number> {
  const handle = await open(file, 'r');
  const buffer = Buffer.allocUnsafe(PLAIN_READ_SIZE_BYTES);
  let total = 0;
  try {
    for (;;) {
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, total);
      if (bytesRead === 0) break;
      total += bytesRead;
    }
  } finally {
    await handle.close();
  }
  return total;
}

async function countScannedRecords(file: string): Promise<number> {
  let count = 0;
  for await (const record of scanRecords(file)) if (record instanceof Uint8Array) count += 1;
  return count;
}

async function countScannedChunks(file: string): Promise<number> {
  let count = 0;
  for await (const chunk of scanChunks(file)) count += chunk.records.length;
  return count;
}

async function countIndexedChunks(file: string): Promise<number> {
  const index = await loadIndex(file);
  let count = 0;
  for (const chunk of index.chunks) count += (await readChunkAt(file, chunk.offset)).records.length;
  return count;
}

/** Best wall time of `repeat` runs of `work`, in seconds. */
async function bestOf(repeat: number, work: () => Promise<unknown>): Promise<number> {
  let best = Infinity;
  for (let i = 0; i < repeat; i++) {
    const started = performance.now();
    await work();
    best = Math.min(best, (performance.now() - started) / 1000);
  }
  return best;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      'size-mb': { type: 'string', default: '200' },
      'record-bytes': { type: 'string', default: '800' },
      repeat: { type: 'string', default: '3' },
      dir: { type: 'string' },
      json: { type: 'boolean', default: false },
    },
  });
  const sizeMb = Number(values['size-mb']);
  const recordBytes = Number(values['record-bytes']);
  const repeat = Number(values.repeat);
  if (!(sizeMb > 0) || !(recordBytes > 0) || !Number.isInteger(repeat) || repeat < 1) {
    throw new RangeError('--size-mb and --record-bytes must be positive, --repeat a positive integer');
  }
  const numRecords = Math.ceil((sizeMb * BYTES_PER_MB) / recordBytes);
  const pool = recordPool(recordBytes);
  const dir = await mkdtemp(path.join(values.dir ?? os.tmpdir(), 'recordio-bench-'));
  const results: Measurement[] = [];
  const writes: { compressor: string; fileMb: number; writeSeconds: number }[] = [];
  try {
    for (const compressor of [Compressor.None, Compressor.Snappy]) {
      const name = compressorName(compressor);
      const file = path.join(dir, `bench-${name}.recordio`);
      const writeSeconds = await writeDataset(file, compressor, numRecords, pool);
      const fileBytes = (await stat(file)).size;
      writes.push({ compressor: name, fileMb: fileBytes / BYTES_PER_MB, writeSeconds });
      const methods: [string, () => Promise<number>][] = [
        ['plain fs read (1 MiB reads)', () => plainRead(file)],
        ['scanRecords', () => countScannedRecords(file)],
        ['scanChunks', () => countScannedChunks(file)],
        ['loadIndex + readChunkAt', () => countIndexedChunks(file)],
      ];
      let plainSeconds = 0;
      for (const [method, work] of methods) {
        const seconds = await bestOf(repeat, work);
        if (method.startsWith('plain')) plainSeconds = seconds;
        else if ((await work()) !== numRecords) throw new Error(`${method} did not return all ${numRecords} records`);
        results.push({
          compressor: name,
          method,
          seconds,
          fileMbPerSecond: fileBytes / BYTES_PER_MB / seconds,
          recordMbPerSecond: (numRecords * recordBytes) / BYTES_PER_MB / seconds,
          recordsPerSecond: numRecords / seconds,
          ratioToPlain: plainSeconds / seconds,
        });
      }
      await rm(file);
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }

  if (values.json) {
    console.log(JSON.stringify({ sizeMb, recordBytes, numRecords, repeat, writes, results }, null, 2));
    return;
  }
  console.log(
    `RecordIO read throughput: ${numRecords} records of ${recordBytes} bytes (~${sizeMb} MB), best of ${repeat}`,
  );
  for (const w of writes) {
    console.log(`  wrote ${w.compressor}: ${w.fileMb.toFixed(1)} MB file in ${w.writeSeconds.toFixed(2)} s`);
  }
  console.table(
    results.map((r) => ({
      compressor: r.compressor,
      method: r.method,
      seconds: Number(r.seconds.toFixed(3)),
      'file MB/s': Number(r.fileMbPerSecond.toFixed(0)),
      'record MB/s': Number(r.recordMbPerSecond.toFixed(0)),
      'records/s': Math.round(r.recordsPerSecond),
      'vs plain': Number(r.ratioToPlain.toFixed(3)),
    })),
  );
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
