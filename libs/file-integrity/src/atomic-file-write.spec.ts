import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { writeFileAtomically, writeFileAtomicallySync } from './atomic-file-write.js';

describe('atomic file write', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'atomic-write-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('atomic file write - replaces the file and leaves no temporary behind', async () => {
    const file = join(dir, 'state.json');
    await writeFileAtomically(file, 'old');
    await writeFileAtomically(file, new Uint8Array([110, 101, 119]), { durable: true });
    writeFileAtomicallySync(file, 'newer');
    writeFileAtomicallySync(file, 'newest', { durable: true });
    expect(await readFile(file, 'utf8')).toBe('newest');
    expect(await readdir(dir)).toEqual(['state.json']);
  });

  it('atomic file write - a failed write removes its temporary and keeps no file', async () => {
    const file = join(dir, 'missing', 'state.json');
    await expect(writeFileAtomically(file, 'x')).rejects.toMatchObject({ code: 'ENOENT' });
    expect(() => writeFileAtomicallySync(file, 'x')).toThrow(/ENOENT/);
    expect(await readdir(dir)).toEqual([]);
  });
});
