import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { readChunkAt } from './chunk-reader.js';
import { Compressor } from './compressor.js';
import { NoMatchingFilesError } from './errors.js';
import { expandPatterns, indexFiles } from './multi-file-index.js';
import { writeRecordFile } from './record-writer.js';

const text = (value: string): Uint8Array => new TextEncoder().encode(value);
const decode = (records: Uint8Array[]): string[] => records.map((r) => new TextDecoder().decode(r));

describe('multi-file index', () => {
  let dir: string;
  /** Records of each file, by base name. */
  const contents: Record<string, string[]> = {
    'train-00002.recordio': ['c0', 'c1', 'c2'],
    'train-00000.recordio': ['a0', 'a1', 'a2', 'a3', 'a4'],
    'train-00001.recordio': ['b0'],
    'test-00000.recordio': ['t0', 't1'],
  };

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'recordio-multi-'));
    await mkdir(path.join(dir, 'more'));
    for (const [name, records] of Object.entries(contents)) {
      await writeRecordFile(path.join(dir, name), records.map(text), {
        maxChunkSizeBytes: 4,
        compressor: Compressor.Snappy,
      });
    }
    await writeRecordFile(path.join(dir, 'more', 'train-00003.recordio'), [text('d0')], {
      compressor: Compressor.None,
    });
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('multi-file index - patterns expand to sorted absolute paths without duplicates', async () => {
    const files = await expandPatterns([
      `${dir}/train-*.recordio`,
      path.join(dir, 'train-00001.recordio'),
      `${dir}/**/train-0000[13].recordio`,
    ]);
    expect(files).toEqual([
      path.join(dir, 'more', 'train-00003.recordio'),
      path.join(dir, 'train-00000.recordio'),
      path.join(dir, 'train-00001.recordio'),
      path.join(dir, 'train-00002.recordio'),
    ]);
  });

  it('multi-file index - relative patterns resolve against cwd', async () => {
    expect(await expandPatterns(['test-*.recordio'], { cwd: dir })).toEqual([path.join(dir, 'test-00000.recordio')]);
  });

  it('multi-file index - a pattern that matches nothing is an error naming it', async () => {
    const pattern = `${dir}/valid-*.recordio`;
    const attempt = expandPatterns([`${dir}/train-*.recordio`, pattern]);
    await expect(attempt).rejects.toThrow(NoMatchingFilesError);
    await expect(attempt).rejects.toMatchObject({ pattern });
    await expect(attempt).rejects.toThrow(pattern);
    await expect(expandPatterns([dir])).rejects.toThrow(NoMatchingFilesError);
  });

  it('multi-file index - the global chunk list follows file order, and each chunk reads back by (file, offset)', async () => {
    const index = await indexFiles([`${dir}/train-*.recordio`]);
    const names = ['train-00000.recordio', 'train-00001.recordio', 'train-00002.recordio'];
    expect(index.files).toEqual(names.map((n) => path.join(dir, n)));
    expect(index.fileIndexes.map((i) => i.totalRecords)).toEqual([5, 1, 3]);
    expect(index.totalRecords).toBe(9);
    expect(index.totalChunks).toBe(index.chunks.length);
    // maxChunkSizeBytes 4 and two-byte records: two records per chunk.
    expect(
      index.chunks.map((c) => [
        path.basename(c.file),
        c.chunkIndexInFile,
        c.numRecords,
        c.firstRecord,
        c.globalFirstRecord,
      ]),
    ).toEqual([
      ['train-00000.recordio', 0, 2, 0, 0],
      ['train-00000.recordio', 1, 2, 2, 2],
      ['train-00000.recordio', 2, 1, 4, 4],
      ['train-00001.recordio', 0, 1, 0, 5],
      ['train-00002.recordio', 0, 2, 0, 6],
      ['train-00002.recordio', 1, 1, 2, 8],
    ]);
    const all: string[] = [];
    for (const chunk of index.chunks) all.push(...decode((await readChunkAt(chunk.file, chunk.offset)).records));
    expect(all).toEqual(names.flatMap((n) => contents[n]!));
  });
});
