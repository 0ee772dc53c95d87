import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { encodeChunk } from './chunk.js';
import { loadIndex } from './chunk-index.js';
import { readChunkAt } from './chunk-reader.js';
import { Compressor } from './compressor.js';
import { scanRecords } from './record-scanner.js';
import { RecordWriter } from './record-writer.js';

/** Test vectors produced by PaddlePaddle's Go recordio package. */
const NONE_VECTOR =
  '04030201873a67950000000011000000020000000500000031323334350400000031323334' +
  '040302019a5680f2000000000600000001000000020000003132';
const SNAPPY_VECTOR =
  '040302015c2b1953010000002500000002000000ff060000734e6150705901170000b2db730a0500000048656c6c6f06000000576f726c6421';
const GZIP_VECTOR =
  '04030201204180f6020000002b000000020000001f8b08000000000000ff62656060f048cdc9c96763606008cf2fca495104040000ffff837e475913000000';

const text = (value: string): Uint8Array => new TextEncoder().encode(value);
const hex = (bytes: Uint8Array): string => Buffer.from(bytes).toString('hex');
const asText = (records: Uint8Array[]): string[] => records.map((r) => new TextDecoder().decode(r));

async function collect(file: string): Promise<Uint8Array[]> {
  const records: Uint8Array[] = [];
  for await (const record of scanRecords(file)) records.push(record);
  return records;
}

describe('recordio vectors', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'recordio-vectors-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('recordio vectors - the writer reproduces the Go file without compression, two chunks', async () => {
    const file = path.join(dir, 'none.recordio');
    const writer = await RecordWriter.open(file, { maxChunkSizeBytes: 10, compressor: Compressor.None });
    for (const record of ['12345', '1234', '12']) await writer.write(text(record));
    await writer.close();
    expect(hex(await readFile(file))).toBe(NONE_VECTOR);
  });

  it('recordio vectors - the Go file without compression indexes to chunks at 0 and 37', async () => {
    const file = path.join(dir, 'none-go.recordio');
    await writeFile(file, Buffer.from(NONE_VECTOR, 'hex'));
    const index = await loadIndex(file);
    expect(index.chunks.map((c) => [c.offset, c.numRecords, c.firstRecord, c.compressor])).toEqual([
      [0, 2, 0, Compressor.None],
      [37, 1, 2, Compressor.None],
    ]);
    expect(index.totalRecords).toBe(3);
    expect(asText((await readChunkAt(file, 37)).records)).toEqual(['12']);
    expect(asText(await collect(file))).toEqual(['12345', '1234', '12']);
  });

  it('recordio vectors - snappy encoding is byte-identical to Go', async () => {
    expect(hex(encodeChunk([text('Hello'), text('World!')], Compressor.Snappy))).toBe(SNAPPY_VECTOR);
    const file = path.join(dir, 'snappy.recordio');
    const writer = await RecordWriter.open(file, { compressor: Compressor.Snappy });
    await writer.write(text('Hello'));
    await writer.write(text('World!'));
    await writer.close();
    expect(hex(await readFile(file))).toBe(SNAPPY_VECTOR);
  });

  it('recordio vectors - the Go snappy file decodes to its records', async () => {
    const file = path.join(dir, 'snappy-go.recordio');
    await writeFile(file, Buffer.from(SNAPPY_VECTOR, 'hex'));
    expect(asText(await collect(file))).toEqual(['Hello', 'World!']);
  });

  it('recordio vectors - the Go gzip file decodes to its records', async () => {
    const file = path.join(dir, 'gzip-go.recordio');
    await writeFile(file, Buffer.from(GZIP_VECTOR, 'hex'));
    const index = await loadIndex(file);
    expect(index.chunks).toHaveLength(1);
    expect(index.chunks[0]!.compressor).toBe(Compressor.Gzip);
    expect(asText((await readChunkAt(file, 0)).records)).toEqual(['Hello', 'World!']);
  });

  it('recordio vectors - our gzip chunks round-trip', async () => {
    const file = path.join(dir, 'gzip.recordio');
    await writeFile(file, encodeChunk([text('Hello'), text('World!'), new Uint8Array(0)], Compressor.Gzip));
    expect(asText(await collect(file))).toEqual(['Hello', 'World!', '']);
  });

  it('recordio vectors - the default writer compresses with snappy, like Go', async () => {
    const file = path.join(dir, 'default.recordio');
    const writer = await RecordWriter.open(file);
    await writer.write(text('Hello'));
    await writer.write(text('World!'));
    await writer.close();
    expect(hex(await readFile(file))).toBe(SNAPPY_VECTOR);
  });
});
