import fc from 'fast-check';
import { encodeExampleValues as encodeRecord } from '#libs/dataset';
import type { RecordLayout } from '#libs/learner';
import { BadMagicError } from '#libs/recordio';
import { TaskDataError } from './errors.js';
import { MinibatchReader, type TaskChunk } from './minibatch-reader.js';

const LAYOUT: RecordLayout = {
  featureShape: [2],
  featureDtype: 'float32',
  scale: 1,
  labelDtype: 'int32',
  numClasses: 1000,
};

/** Chunk i holds `sizes[i]` records; record n has features [n, -n] and label n. */
function fakeChunks(sizes: number[]) {
  const files = new Map<string, Uint8Array[]>();
  let n = 0;
  const chunks: TaskChunk[] = sizes.map((size, i) => {
    const records = Array.from({ length: size }, () => {
      const r = encodeRecord([n, -n], n, LAYOUT);
      n += 1;
      return r;
    });
    files.set(`f${i}@${i * 100}`, records);
    return { file: `f${i}`, offset: i * 100, numRecords: size };
  });
  const readChunk = async (file: string, offset: number) => ({ records: files.get(`${file}@${offset}`)! });
  return { chunks, readChunk, total: n };
}

async function collect(reader: MinibatchReader, chunks: TaskChunk[]) {
  const out = [];
  for await (const b of reader.batches(chunks))
    out.push({ size: b.size, labels: [...b.labels], features: [...b.features] });
  return out;
}

describe('minibatch reader', () => {
  it('minibatch reader - records become batches of batchSize in order, the last one smaller', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.integer({ min: 0, max: 9 }), { maxLength: 6 }),
        fc.integer({ min: 1, max: 7 }),
        async (sizes, batchSize) => {
          const { chunks, readChunk, total } = fakeChunks(sizes);
          const batches = await collect(new MinibatchReader({ batchSize, layout: LAYOUT, readChunk }), chunks);
          expect(batches.length).toBe(Math.ceil(total / batchSize));
          batches.forEach((b, i) => {
            if (i < batches.length - 1) expect(b.size).toBe(batchSize);
            else expect(b.size).toBeLessThanOrEqual(batchSize);
          });
          const labels = batches.flatMap((b) => b.labels);
          expect(labels).toEqual(Array.from({ length: total }, (_, n) => n));
          expect(batches.flatMap((b) => b.features)).toEqual(labels.flatMap((n) => [n, -n]));
        },
      ),
      { numRuns: 60 },
    );
  });

  it('minibatch reader - 10 records in batches of 4 give 4, 4, 2', async () => {
    const { chunks, readChunk } = fakeChunks([3, 7]);
    const batches = await collect(new MinibatchReader({ batchSize: 4, layout: LAYOUT, readChunk }), chunks);
    expect(batches.map((b) => b.size)).toEqual([4, 4, 2]);
    expect(batches[1]!.labels).toEqual([4, 5, 6, 7]);
  });

  it('minibatch reader - a chunk that cannot be read is named by file and offset', async () => {
    const reader = new MinibatchReader({
      batchSize: 2,
      layout: LAYOUT,
      readChunk: async () => {
        throw new Error('ENOENT: no such file');
      },
    });
    const err = await collect(reader, [{ file: '/data/x.recordio', offset: 64, numRecords: 1 }]).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(TaskDataError);
    expect((err as Error).message).toBe('/data/x.recordio: chunk at byte 64: ENOENT: no such file');
  });

  it('minibatch reader - RecordIO errors pass through, they already name file and offset', async () => {
    const bad = new BadMagicError({ file: '/data/x.recordio', offset: 37 }, 0xdeadbeef);
    const reader = new MinibatchReader({ batchSize: 2, layout: LAYOUT, readChunk: () => Promise.reject(bad) });
    await expect(collect(reader, [{ file: '/data/x.recordio', offset: 37, numRecords: 1 }])).rejects.toBe(bad);
  });

  it('minibatch reader - a record count that differs from the task, or a record of another layout, fails', async () => {
    const { chunks, readChunk } = fakeChunks([3]);
    const reader = new MinibatchReader({ batchSize: 2, layout: LAYOUT, readChunk });
    await expect(collect(reader, [{ ...chunks[0]!, numRecords: 4 }])).rejects.toThrow(
      /f0: chunk at byte 0: holds 3 records but the task says 4/,
    );
    const other = new MinibatchReader({ batchSize: 2, layout: { ...LAYOUT, featureShape: [3] }, readChunk });
    await expect(collect(other, chunks)).rejects.toThrow(TaskDataError);
  });
});
