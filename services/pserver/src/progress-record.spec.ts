import fc from 'fast-check';
import { mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  PROGRESS_RECORD_FILE,
  decodeProgressRecord,
  encodeProgressRecord,
  readProgressRecord,
  syncProgressRecord,
  writeProgressRecord,
  type ProgressRecord,
} from './progress-record.js';

let dir: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tributary-progress-'));
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const record = (version: number): ProgressRecord => ({
  jobId: 'job-1',
  shard: 2,
  version,
  members: [
    { trainerId: 'trainer-a', countedFrom: 1 },
    { trainerId: 'trainer-b', countedFrom: version + 1 },
  ],
});

describe('progress record', () => {
  it('progress record - the format round-trips any record', () => {
    const member = fc.record({ trainerId: fc.string(), countedFrom: fc.nat() });
    fc.assert(
      fc.property(
        fc.string(),
        fc.nat(4095),
        fc.nat(),
        fc.array(member, { maxLength: 8 }),
        (jobId, shard, version, members) => {
          const r = { jobId, shard, version, members };
          expect(decodeProgressRecord(encodeProgressRecord(r))).toEqual(r);
        },
      ),
    );
  });

  it('progress record - any changed byte is caught', () => {
    const bytes = encodeProgressRecord(record(41));
    fc.assert(
      fc.property(fc.nat(bytes.length - 2), fc.integer({ min: 1, max: 255 }), (at, flip) => {
        const damaged = Buffer.from(bytes);
        damaged[at] ^= flip;
        // A flip either breaks the JSON, a field, or the CRC; it never yields another valid record.
        let decoded: ProgressRecord | undefined;
        try {
          decoded = decodeProgressRecord(damaged);
        } catch {
          decoded = undefined;
        }
        expect(decoded).toBeUndefined();
      }),
    );
  });

  it('progress record - each write replaces the record whole and leaves no temporary file', async () => {
    expect(readProgressRecord(dir)).toBeUndefined();
    for (let v = 0; v < 20; v++) writeProgressRecord(dir, record(v));
    writeProgressRecord(dir, record(20), true);
    await syncProgressRecord(dir);
    expect(readProgressRecord(dir)).toEqual(record(20));
    expect(await readdir(dir)).toEqual([PROGRESS_RECORD_FILE]);
  });

  it('progress record - a damaged record is an error naming the file', async () => {
    writeProgressRecord(dir, record(7));
    const path = join(dir, PROGRESS_RECORD_FILE);
    const text = await readFile(path, 'utf8');
    await writeFile(path, text.replace('"version":7', '"version":9'));
    expect(() => readProgressRecord(dir)).toThrow(new RegExp(`progress record ${path} is damaged: CRC-32 mismatch`));
    await writeFile(path, text.slice(0, 20));
    expect(() => readProgressRecord(dir)).toThrow(/is damaged/);
  });
});
