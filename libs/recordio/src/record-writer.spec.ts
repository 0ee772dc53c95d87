import { mkdtemp, open, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { PassThrough, Writable } from 'node:stream';
import { encodeChunk } from './chunk.js';
import { Compressor } from './compressor.js';
import { WriterClosedError } from './errors.js';
import { RecordWriter } from './record-writer.js';

const text = (value: string): Uint8Array => new TextEncoder().encode(value);
const RECORDS = ['one', 'two', 'three', '', 'four'].map(text);

/** What the writer should produce for RECORDS with maxChunkSizeBytes 6. */
const EXPECTED = Buffer.concat([
  encodeChunk(RECORDS.slice(0, 2), Compressor.Gzip),
  encodeChunk(RECORDS.slice(2, 4), Compressor.Gzip),
  encodeChunk(RECORDS.slice(4), Compressor.Gzip),
]);

describe('record writer', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'recordio-writer-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('record writer - writes to a Writable and leaves it open', async () => {
    const parts: Buffer[] = [];
    const sink = new PassThrough();
    sink.on('data', (part: Buffer) => parts.push(part));
    const writer = await RecordWriter.open(sink, { maxChunkSizeBytes: 6, compressor: Compressor.Gzip });
    for (const record of RECORDS) await writer.write(record);
    await writer.close();
    expect(sink.writableEnded).toBe(false);
    expect(Buffer.concat(parts).equals(EXPECTED)).toBe(true);
    expect([writer.chunksWritten, writer.recordsWritten, writer.bytesWritten]).toEqual([3, 5, EXPECTED.length]);
  });

  it('record writer - writes to a file descriptor and leaves it open', async () => {
    const file = path.join(dir, 'fd.recordio');
    const handle = await open(file, 'w');
    try {
      const writer = await RecordWriter.open(handle.fd, { maxChunkSizeBytes: 6, compressor: Compressor.Gzip });
      for (const record of RECORDS) await writer.write(record);
      await writer.close();
      await handle.write(Buffer.from('tail'));
    } finally {
      await handle.close();
    }
    expect((await readFile(file)).equals(Buffer.concat([EXPECTED, Buffer.from('tail')]))).toBe(true);
  });

  it('record writer - writes made without awaiting keep their order, and records are copied', async () => {
    const file = path.join(dir, 'unawaited.recordio');
    const writer = await RecordWriter.open(file, { maxChunkSizeBytes: 6, compressor: Compressor.Gzip });
    const reused = new Uint8Array(5);
    const pending = RECORDS.map((record) => {
      reused.set(record);
      return writer.write(reused.subarray(0, record.length));
    });
    reused.fill(0);
    await Promise.all([...pending, writer.close()]);
    expect((await readFile(file)).equals(EXPECTED)).toBe(true);
  });

  it('record writer - a write after close is refused', async () => {
    const writer = await RecordWriter.open(path.join(dir, 'closed.recordio'));
    await writer.close();
    await expect(writer.write(text('late'))).rejects.toThrow(WriterClosedError);
    await writer.close();
  });

  it('record writer - a failing sink fails the next write and close', async () => {
    const failing = new Writable({
      write(_chunk, _encoding, callback) {
        callback(new Error('disk full'));
      },
    });
    failing.on('error', () => undefined);
    const writer = await RecordWriter.open(failing, { maxChunkSizeBytes: 1, compressor: Compressor.None });
    await writer.write(text('a'));
    await expect(writer.write(text('b'))).rejects.toThrow('disk full');
    await expect(writer.write(text('c'))).rejects.toThrow('disk full');
    await expect(writer.close()).rejects.toThrow('disk full');
  });

  it('record writer - bad options are refused', async () => {
    const file = path.join(dir, 'options.recordio');
    await expect(RecordWriter.open(file, { maxChunkSizeBytes: -1 })).rejects.toThrow(RangeError);
    await expect(RecordWriter.open(file, { compressor: 9 as Compressor })).rejects.toThrow(RangeError);
  });
});
