import { mkdtemp, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { PathOutsideRootsError } from '#libs/config';
import { encodeExampleValues } from '#libs/dataset';
import type { RecordLayout } from '#libs/learner';
import { writeRecordFile } from '#libs/recordio';
import { confinedChunkSource } from './confined-chunks.js';
import { TaskDataError } from './errors.js';
import { MinibatchReader } from './minibatch-reader.js';

const LAYOUT: RecordLayout = {
  featureShape: [2],
  featureDtype: 'float32',
  scale: 1,
  labelDtype: 'int32',
  numClasses: 10,
};
const RECORDS = 3;

describe('confined chunks', () => {
  let root: string;
  let outside: string;

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'tributary-confined-root-'));
    outside = await mkdtemp(join(tmpdir(), 'tributary-confined-outside-'));
    const records = Array.from({ length: RECORDS }, (_, n) => encodeExampleValues([n, -n], n, LAYOUT));
    await writeRecordFile(join(root, 'in.recordio'), records);
    await writeRecordFile(join(outside, 'out.recordio'), records);
    await symlink(join(outside, 'out.recordio'), join(root, 'link.recordio'));
  });

  afterAll(async () => {
    await rm(root, { recursive: true, force: true });
    await rm(outside, { recursive: true, force: true });
  });

  /** Reads one task of the single chunk at offset 0 of `file`, from chunks confined to `root`. */
  async function readTask(file: string): Promise<number> {
    const reader = new MinibatchReader({ batchSize: 2, layout: LAYOUT, readChunk: confinedChunkSource([root]) });
    let records = 0;
    for await (const batch of reader.batches({
      chunks: [{ file, offset: 0, numRecords: RECORDS }],
      epoch: 0,
      taskId: 0,
    }))
      records += batch.size;
    return records;
  }

  it('confined chunks - a chunk inside the data roots is read', async () => {
    expect(await readTask(join(root, 'in.recordio'))).toBe(RECORDS);
  });

  it('confined chunks - a chunk outside the roots (absolute, .., a link out) fails the task naming the file, the field and the roots', async () => {
    for (const file of [
      join(outside, 'out.recordio'),
      join(root, '..', basename(outside), 'out.recordio'),
      join(root, 'link.recordio'),
    ]) {
      const err = await readTask(file).catch((e: unknown) => e);
      expect([file, err]).toEqual([file, expect.any(TaskDataError)]);
      expect((err as TaskDataError).cause).toBeInstanceOf(PathOutsideRootsError);
      expect((err as Error).message).toBe(
        `${file}: chunk at byte 0: dataset.train: ${JSON.stringify(file)} is outside TRIBUTARY_DATA_ROOT (${root})`,
      );
    }
  });
});
