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
  ProgressRecordFile,
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
    const file = new ProgressRecordFile(dir);
    for (let v = 0; v < 20; v++) {
      file.write(record(v));
      expect(readProgressRecord(dir)).toEqual(record(v));
    }
    file.write(record(20), true);
    await syncProgressRecord(dir);
    expect(readProgressRecord(dir)).toEqual(record(20));
    expect(await readdir(dir)).toEqual([PROGRESS_RECORD_FILE]);
    file.close();
  });

  it('progress record - a record too big for the slots makes a file with bigger ones', async () => {
    const file = new ProgressRecordFile(dir);
    file.write(record(1));
    const crowd = {
      ...record(2),
      members: Array.from({ length: 300 }, (_, i) => ({ trainerId: `trainer-${i}`, countedFrom: i })),
    };
    file.write(crowd);
    expect(readProgressRecord(dir)).toEqual(crowd);
    file.write(record(3));
    expect(readProgressRecord(dir)).toEqual(record(3));
    file.close();
  });

  it('progress record - a slot torn by a crash leaves the record before it', async () => {
    const file = new ProgressRecordFile(dir);
    file.write(record(6));
    file.write(record(7));
    file.close();
    const path = join(dir, PROGRESS_RECORD_FILE);
    const bytes = await readFile(path);
    // Version 7 went to the first slot (the second write); tear it.
    expect(bytes.indexOf('"version":7')).toBeLessThan(bytes.length / 2);
    bytes.fill(0, 30, bytes.length / 2);
    await writeFile(path, bytes);
    expect(readProgressRecord(dir)).toEqual(record(6));
  });

  it('progress record - a file of one record (the earlier format) is read', async () => {
    await writeFile(join(dir, PROGRESS_RECORD_FILE), encodeProgressRecord(record(4)));
    expect(readProgressRecord(dir)).toEqual(record(4));
  });

  it('progress record - a damaged record is an error naming the file', async () => {
    const file = new ProgressRecordFile(dir);
    file.write(record(7));
    file.close();
    const path = join(dir, PROGRESS_RECORD_FILE);
    const text = await readFile(path, 'latin1');
    await writeFile(path, text.replaceAll('"version":7', '"version":9'), 'latin1');
    expect(() => readProgressRecord(dir)).toThrow(new RegExp(`progress record ${path} is damaged: CRC-32 mismatch`));
    await writeFile(path, text.slice(0, 20), 'latin1');
    expect(() => readProgressRecord(dir)).toThrow(/is damaged/);
  });
});
