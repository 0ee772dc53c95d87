import { existsSync } from 'node:fs';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Compressor } from './compressor.js';
import { scanChunks, scanRecords } from './record-scanner.js';
import { writeRecordFile } from './record-writer.js';

const text = (value: string): Uint8Array => new TextEncoder().encode(value);
const decode = (record: Uint8Array): string => new TextDecoder().decode(record);

describe('record scanner', () => {
  let dir: string;
  let file: string;
  const names = Array.from({ length: 25 }, (_, i) => `record-${i}`);

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'recordio-scanner-'));
    file = path.join(dir, 'scan.recordio');
    await writeRecordFile(file, names.map(text), { maxChunkSizeBytes: 30, compressor: Compressor.Snappy });
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('record scanner - chunks arrive in file order with their offsets', async () => {
    const seen: string[] = [];
    let offset = -1;
    for await (const chunk of scanChunks(file)) {
      expect(chunk.offset).toBeGreaterThan(offset);
      offset = chunk.offset;
      expect(chunk.numRecords).toBe(chunk.records.length);
      seen.push(...chunk.records.map(decode));
    }
    expect(seen).toEqual(names);
  });

  it('record scanner - next() calls made without awaiting still get the records in order', async () => {
    const iterator = scanRecords(file);
    const results = await Promise.all(Array.from({ length: names.length + 2 }, () => iterator.next()));
    expect(results.slice(0, names.length).map((r) => (r.done ? null : decode(r.value)))).toEqual(names);
    expect(results.slice(names.length).every((r) => r.done)).toBe(true);
  });

  it('record scanner - leaving the loop early closes the file', async () => {
    const openFiles = async (): Promise<number> =>
      existsSync('/proc/self/fd') ? (await readdir('/proc/self/fd')).length : 0;
    const before = await openFiles();
    const taken: string[] = [];
    for await (const record of scanRecords(file)) {
      taken.push(decode(record));
      if (taken.length === 5) break;
    }
    expect(taken).toEqual(names.slice(0, 5));
    expect(await openFiles()).toBe(before);
  });
});
