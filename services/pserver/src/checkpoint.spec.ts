import fc from 'fast-check';
import { mkdtemp, readFile, readdir, rm, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  CHECKPOINT_METADATA_FILE,
  checkpointFileName,
  decodeCheckpoint,
  encodeCheckpoint,
  loadCheckpoint,
  writeCheckpoint,
  type CheckpointData,
} from './checkpoint.js';
import { CheckpointError } from './errors.js';

function checkpoint(version: number, fill = version): CheckpointData {
  return {
    jobId: 'job-1',
    shard: 0,
    version,
    specJson: '{"optimizer":{"type":"adam","learningRate":0.01}}',
    optimizer: 'adam',
    tensors: [
      {
        name: 'dense/kernel',
        shape: [2, 3],
        value: new Float32Array(6).fill(fill),
        state: [new Float32Array(6).fill(1), new Float32Array(6).fill(2)],
      },
      {
        name: 'dense/bias',
        shape: [3],
        value: new Float32Array(3).fill(-fill),
        state: [new Float32Array(3), new Float32Array(3)],
      },
    ],
  };
}

let dir: string;
const lines: string[] = [];
const log = (line: string) => lines.push(line);

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tributary-ckpt-'));
  lines.length = 0;
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('checkpoint', () => {
  it('checkpoint - the data format round-trips any tensors', () => {
    const tensor = fc.record({
      name: fc.string({ minLength: 1, maxLength: 20 }),
      values: fc.array(fc.float({ noNaN: true }), { maxLength: 40 }),
      slots: fc.integer({ min: 0, max: 2 }),
    });
    fc.assert(
      fc.property(fc.array(tensor, { maxLength: 5 }), fc.nat(), fc.string(), (tensors, version, specJson) => {
        const data: CheckpointData = {
          jobId: 'j',
          shard: 3,
          version,
          specJson,
          optimizer: 'momentum',
          tensors: tensors.map((t) => ({
            name: t.name,
            shape: [t.values.length],
            value: Float32Array.from(t.values),
            state: Array.from({ length: t.slots }, (_, s) => Float32Array.from(t.values, (v) => v * (s + 2))),
          })),
        };
        expect(decodeCheckpoint(encodeCheckpoint(data), 'mem')).toEqual(data);
      }),
    );
  });

  it('checkpoint - writes data then metadata and keeps the newest files', async () => {
    await writeCheckpoint(dir, checkpoint(1));
    await writeCheckpoint(dir, checkpoint(2));
    const record = await writeCheckpoint(dir, checkpoint(3));
    expect(record).toMatchObject({ version: 3, file: checkpointFileName(3) });
    const files = (await readdir(dir)).sort();
    expect(files).toEqual([checkpointFileName(2), checkpointFileName(3), CHECKPOINT_METADATA_FILE].sort());
    const meta = JSON.parse(await readFile(join(dir, CHECKPOINT_METADATA_FILE), 'utf8'));
    expect(meta).toMatchObject({ version: 3, file: checkpointFileName(3), bytes: record.bytes, crc32: record.crc32 });
    expect(meta.previous.map((r: { version: number }) => r.version)).toEqual([2]);
    const loaded = await loadCheckpoint(dir, log);
    expect(loaded?.data).toEqual(checkpoint(3));
    expect(lines).toEqual([]);
  });

  it('checkpoint - keeps as many checkpoints as asked', async () => {
    for (const v of [1, 2, 3, 4]) await writeCheckpoint(dir, checkpoint(v), 3);
    expect((await readdir(dir)).filter((f) => f.endsWith('.bin')).length).toBe(3);
  });

  it('checkpoint - a truncated latest checkpoint falls back to the previous one', async () => {
    await writeCheckpoint(dir, checkpoint(1));
    const latest = await writeCheckpoint(dir, checkpoint(2));
    await truncate(join(dir, latest.file), latest.bytes - 10);
    const loaded = await loadCheckpoint(dir, log);
    expect(loaded?.data.version).toBe(1);
    expect(loaded?.data).toEqual(checkpoint(1));
    expect(lines.join('\n')).toMatch(/truncated.*falling back to ckpt-000000000001\.bin/);
  });

  it('checkpoint - a flipped byte is caught by the CRC', async () => {
    await writeCheckpoint(dir, checkpoint(1));
    const latest = await writeCheckpoint(dir, checkpoint(2));
    const path = join(dir, latest.file);
    const bytes = await readFile(path);
    bytes[bytes.length - 20] ^= 0xff;
    await writeFile(path, bytes);
    const loaded = await loadCheckpoint(dir, log);
    expect(loaded?.data.version).toBe(1);
    expect(lines.join('\n')).toMatch(/CRC-32 mismatch/);
    expect(() => decodeCheckpoint(bytes, path)).toThrow(/CRC-32 mismatch: stored 0x[0-9a-f]{8}, computed/);
  });

  it('checkpoint - without metadata, data files are checked by their own CRC, newest first', async () => {
    await writeCheckpoint(dir, checkpoint(1));
    const latest = await writeCheckpoint(dir, checkpoint(2));
    await writeFile(join(dir, CHECKPOINT_METADATA_FILE), '{"version": 2, "fi');
    await truncate(join(dir, latest.file), 100);
    const loaded = await loadCheckpoint(dir, log);
    expect(loaded?.data.version).toBe(1);
    expect(lines[0]).toMatch(/checkpoint\.json unreadable/);
  });

  it('checkpoint - a write over unreadable metadata keeps the older data files as fallbacks', async () => {
    await writeCheckpoint(dir, checkpoint(1));
    await writeCheckpoint(dir, checkpoint(2));
    await writeFile(join(dir, CHECKPOINT_METADATA_FILE), 'garbage');
    const latest = await writeCheckpoint(dir, checkpoint(3));
    expect((await readdir(dir)).sort()).toEqual(
      [checkpointFileName(2), checkpointFileName(3), CHECKPOINT_METADATA_FILE].sort(),
    );
    await truncate(join(dir, latest.file), 10);
    expect((await loadCheckpoint(dir, log))?.data).toEqual(checkpoint(2));
    expect(lines.join('\n')).toMatch(/ckpt-000000000003\.bin: truncated.*falling back to ckpt-000000000002\.bin/);
  });

  it('checkpoint - other files and their temporaries in the directory are left alone', async () => {
    await writeFile(join(dir, 'progress.json.tmp-1'), 'x');
    await writeFile(join(dir, `${CHECKPOINT_METADATA_FILE}.tmp-1-abcd`), 'x');
    await writeCheckpoint(dir, checkpoint(1));
    expect((await readdir(dir)).sort()).toEqual(
      [checkpointFileName(1), CHECKPOINT_METADATA_FILE, 'progress.json.tmp-1'].sort(),
    );
  });

  it('checkpoint - only damaged checkpoints is an error; none at all is undefined', async () => {
    expect(await loadCheckpoint(join(dir, 'missing'))).toBeUndefined();
    expect(await loadCheckpoint(dir)).toBeUndefined();
    const only = await writeCheckpoint(dir, checkpoint(1));
    await truncate(join(dir, only.file), 5);
    await expect(loadCheckpoint(dir, log)).rejects.toThrow(CheckpointError);
    await expect(loadCheckpoint(dir, log)).rejects.toThrow(/no intact checkpoint/);
  });

  it('checkpoint - a crash between data file and metadata leaves the previous checkpoint in force', async () => {
    await writeCheckpoint(dir, checkpoint(1));
    // A newer data file that the metadata never named, and a temporary file of a cut-short write.
    await writeFile(join(dir, checkpointFileName(2)), encodeCheckpoint(checkpoint(2)));
    await writeFile(join(dir, `${checkpointFileName(3)}.tmp-1-abcd`), 'partial');
    expect((await loadCheckpoint(dir, log))?.data.version).toBe(1);
    await writeCheckpoint(dir, checkpoint(4));
    expect((await readdir(dir)).sort()).toEqual(
      [checkpointFileName(1), checkpointFileName(4), CHECKPOINT_METADATA_FILE].sort(),
    );
  });
});
