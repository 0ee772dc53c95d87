import fc from 'fast-check';
import { encodeExampleValues as encodeRecord } from '#libs/dataset';
import { decodeBatch, type Batch, type RecordLayout } from '#libs/learner';
import { BadMagicError } from '#libs/recordio';
import { TaskDataError } from './errors.js';
import {
  MinibatchReader,
  type ChunkSource,
  type MinibatchReaderOptions,
  type TaskChunk,
  type TaskData,
} from './minibatch-reader.js';

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

/** A reader of minibatches of 2 over `readChunk` that records the offset of each chunk it reads. */
function recordingReader(readChunk: ChunkSource, options: Partial<MinibatchReaderOptions> = {}) {
  const asked: number[] = [];
  const reader = new MinibatchReader({
    batchSize: 2,
    layout: LAYOUT,
    ...options,
    readChunk: (file, offset) => (asked.push(offset), readChunk(file, offset)),
  });
  return { reader, asked };
}

async function collect(reader: MinibatchReader, chunks: TaskChunk[], where = { epoch: 0, taskId: 0 }) {
  const out = [];
  for await (const b of reader.batches({ chunks, ...where }))
    out.push({ size: b.size, labels: [...b.labels], features: [...b.features] });
  return out;
}

/** The labels a reader yields for a task, in order (record n has label n). */
async function labelOrder(reader: MinibatchReader, chunks: TaskChunk[], where = { epoch: 0, taskId: 0 }) {
  return (await collect(reader, chunks, where)).flatMap((b) => b.labels);
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

  it('minibatch reader - shuffled, every record of the task comes out exactly once, in full batches', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.integer({ min: 0, max: 12 }), { maxLength: 5 }),
        fc.integer({ min: 1, max: 7 }),
        fc.option(fc.integer({ min: 1, max: 30 }), { nil: undefined }),
        fc.integer(),
        fc.nat({ max: 50 }),
        fc.nat({ max: 50 }),
        async (sizes, batchSize, bufferRecords, seed, epoch, taskId) => {
          const { chunks, readChunk, total } = fakeChunks(sizes);
          const shuffle = bufferRecords === undefined ? { seed } : { seed, bufferRecords };
          const reader = new MinibatchReader({ batchSize, layout: LAYOUT, readChunk, shuffle });
          const batches = await collect(reader, chunks, { epoch, taskId });
          expect(batches.map((b) => b.size)).toEqual(
            Array.from({ length: Math.ceil(total / batchSize) }, (_, i) => Math.min(batchSize, total - i * batchSize)),
          );
          const labels = batches.flatMap((b) => b.labels);
          expect([...labels].sort((a, b) => a - b)).toEqual(Array.from({ length: total }, (_, n) => n));
          // Each example keeps its own features.
          expect(batches.flatMap((b) => b.features)).toEqual(labels.flatMap((n) => [n, -n]));
        },
      ),
      { numRuns: 80 },
    );
  });

  it('minibatch reader - the shuffled order is set by the seed, the epoch and the task id', async () => {
    const { chunks, readChunk } = fakeChunks([10, 10, 10]);
    const order = (seed: number, epoch: number, taskId: number) =>
      labelOrder(new MinibatchReader({ batchSize: 4, layout: LAYOUT, readChunk, shuffle: { seed } }), chunks, {
        epoch,
        taskId,
      });
    const base = await order(7, 2, 3);
    expect(await order(7, 2, 3)).toEqual(base);
    expect(base).not.toEqual(Array.from({ length: 30 }, (_, n) => n));
    const variants = [await order(8, 2, 3), await order(7, 1, 3), await order(7, 2, 4)];
    for (const v of variants) expect(v).not.toEqual(base);
  });

  it('minibatch reader - the default buffer holds as many records as the largest chunk of the task', async () => {
    // Chunks of 4 and 6: a 6-record buffer fills on records 0-5, so the first record out is one
    // of those, and over many seeds each of them.
    const { chunks, readChunk } = fakeChunks([4, 6]);
    const firsts = new Set<number>();
    for (let seed = 0; seed < 200; seed++) {
      const reader = new MinibatchReader({ batchSize: 1, layout: LAYOUT, readChunk, shuffle: { seed } });
      firsts.add((await labelOrder(reader, chunks))[0]!);
    }
    expect([...firsts].sort((a, b) => a - b)).toEqual([0, 1, 2, 3, 4, 5]);
  });

  it('minibatch reader - a one-record buffer, or no shuffle, keeps file order', async () => {
    const { chunks, readChunk, total } = fakeChunks([3, 0, 5, 2]);
    const inOrder = Array.from({ length: total }, (_, n) => n);
    const one = new MinibatchReader({
      batchSize: 3,
      layout: LAYOUT,
      readChunk,
      shuffle: { seed: 1, bufferRecords: 1 },
    });
    expect(await labelOrder(one, chunks)).toEqual(inOrder);
    const plain = new MinibatchReader({ batchSize: 3, layout: LAYOUT, readChunk });
    expect(await labelOrder(plain, chunks, { epoch: 4, taskId: 9 })).toEqual(inOrder);
  });

  it('minibatch reader - shuffled regression labels stay float32', async () => {
    const layout: RecordLayout = { featureShape: [1], featureDtype: 'float32', scale: 1, labelDtype: 'float32' };
    const records = [0.5, 1.5, 2.5].map((y) => encodeRecord([y], y, layout));
    const reader = new MinibatchReader({
      batchSize: 3,
      layout,
      readChunk: async () => ({ records }),
      shuffle: { seed: 3 },
    });
    const batches = [];
    for await (const b of reader.batches({ chunks: [{ file: 'r', offset: 0, numRecords: 3 }], epoch: 0, taskId: 0 })) {
      batches.push(b);
    }
    const [batch] = batches;
    expect(batch!.labels).toBeInstanceOf(Float32Array);
    expect([...batch!.labels].sort()).toEqual([0.5, 1.5, 2.5]);
    expect([...batch!.features]).toEqual([...batch!.labels]);
  });

  it('minibatch reader - uint8 features come out scaled as decodeBatch gives them, in file order and shuffled', async () => {
    const layout: RecordLayout = {
      featureShape: [2, 3],
      featureDtype: 'uint8',
      scale: 1 / 255,
      labelDtype: 'int32',
      numClasses: 10,
    };
    // Records of one chunk may differ in dims ([6] and [2, 3]) as long as the element count fits.
    const records = Array.from({ length: 7 }, (_, n) =>
      encodeRecord(
        Array.from({ length: 6 }, (_, i) => (n * 37 + i * 11) % 256),
        n,
        n % 2 === 0 ? layout : { ...layout, featureShape: [6] },
      ),
    );
    const want = decodeBatch(records, layout);
    for (const shuffle of [undefined, { seed: 7 }]) {
      const reader = new MinibatchReader({ batchSize: 3, layout, readChunk: async () => ({ records }), shuffle });
      const byLabel = new Map<number, number[]>();
      for await (const b of reader.batches({
        chunks: [{ file: 'u', offset: 0, numRecords: 7 }],
        epoch: 0,
        taskId: 0,
      })) {
        for (let k = 0; k < b.size; k++) byLabel.set(b.labels[k]!, [...b.features.subarray(k * 6, (k + 1) * 6)]);
      }
      expect(byLabel.size).toBe(7);
      for (let n = 0; n < 7; n++) expect(byLabel.get(n)).toEqual([...want.features.subarray(n * 6, (n + 1) * 6)]);
    }
    expect(want.features[1]).toBe(Math.fround(11 / 255));
  });

  it('minibatch reader - with featureBytes, uint8 features come as the records hold them, the same examples in the same order', async () => {
    const layout: RecordLayout = {
      featureShape: [5],
      featureDtype: 'uint8',
      scale: 1 / 255,
      labelDtype: 'int32',
      numClasses: 20,
    };
    const records = Array.from({ length: 11 }, (_, n) =>
      encodeRecord(
        Array.from({ length: 5 }, (_, i) => (n * 53 + i * 29) % 256),
        n,
        layout,
      ),
    );
    const raw = decodeBatch(records, { ...layout, scale: 1 });
    const task = { chunks: [{ file: 'u', offset: 0, numRecords: 11 }], epoch: 1, taskId: 3 };
    for (const shuffle of [undefined, { seed: 9 }]) {
      const read = async (featureBytes: boolean) => {
        const reader = new MinibatchReader({
          batchSize: 4,
          layout,
          readChunk: async () => ({ records }),
          shuffle,
          featureBytes,
        });
        const out: { labels: number[]; bytes: number[] | undefined; features: number[] }[] = [];
        for await (const b of reader.batches(task)) {
          out.push({ labels: [...b.labels], bytes: b.featureBytes && [...b.featureBytes], features: [...b.features] });
        }
        return out;
      };
      const floats = await read(false);
      const bytes = await read(true);
      // The same examples in the same minibatches, the last one partial (4, 4, 3).
      expect(bytes.map((b) => b.labels)).toEqual(floats.map((b) => b.labels));
      expect(bytes.map((b) => b.bytes!.length)).toEqual([20, 20, 15]);
      for (const b of bytes) {
        expect(b.features).toEqual([]);
        b.labels.forEach((n, k) =>
          expect(b.bytes!.slice(k * 5, (k + 1) * 5)).toEqual([...raw.features.subarray(n * 5, (n + 1) * 5)]),
        );
      }
      expect(floats.every((b) => b.bytes === undefined)).toBe(true);
    }
  });

  it('minibatch reader - float32 features are converted as ever when featureBytes is asked for', async () => {
    const { chunks, readChunk } = fakeChunks([5]);
    const batches = await collect(
      new MinibatchReader({ batchSize: 2, layout: LAYOUT, readChunk, featureBytes: true }),
      chunks,
    );
    expect(batches[1]!.features).toEqual([2, -2, 3, -3]);
  });

  it('minibatch reader - 10 records in batches of 4 give 4, 4, 2', async () => {
    const { chunks, readChunk } = fakeChunks([3, 7]);
    const batches = await collect(new MinibatchReader({ batchSize: 4, layout: LAYOUT, readChunk }), chunks);
    expect(batches.map((b) => b.size)).toEqual([4, 4, 2]);
    expect(batches[1]!.labels).toEqual([4, 5, 6, 7]);
  });

  it('minibatch reader - arrays the loop is through with are filled again, never the last three handed out', async () => {
    for (const shuffle of [undefined, { seed: 5 }]) {
      const { chunks, readChunk } = fakeChunks([9, 12, 11]);
      const reader = new MinibatchReader({ batchSize: 2, layout: LAYOUT, readChunk, shuffle });
      const buffers = new Set<ArrayBufferLike>();
      let handedOut = 0;
      for (const taskId of [0, 1]) {
        const held: { batch: Batch; labels: number[]; features: number[] }[] = [];
        for await (const batch of reader.batches({ chunks, epoch: 0, taskId })) {
          handedOut += 1;
          held.push({ batch, labels: [...batch.labels], features: [...batch.features] });
          buffers.add(batch.features.buffer);
          // What the loop may still hold: this one, the one it trains, the one whose push is out.
          for (const h of held.slice(-3)) {
            expect([...h.batch.labels]).toEqual(h.labels);
            expect([...h.batch.features]).toEqual(h.features);
          }
        }
      }
      // 32 records a task, 16 minibatches, out of four arrays: the one filled while the loop
      // holds three.
      expect(handedOut).toBe(32);
      expect(buffers.size).toBe(4);
    }
  });

  it('minibatch reader - minibatches of feature bytes are filled again as float32 ones are', async () => {
    const layout: RecordLayout = {
      featureShape: [3],
      featureDtype: 'uint8',
      scale: 1,
      labelDtype: 'int32',
      numClasses: 40,
    };
    const records = Array.from({ length: 32 }, (_, n) => encodeRecord([n, n + 1, n + 2], n, layout));
    const reader = new MinibatchReader({
      batchSize: 2,
      layout,
      readChunk: async () => ({ records }),
      featureBytes: true,
    });
    const buffers = new Set<ArrayBufferLike>();
    const held: { batch: Batch; bytes: number[] }[] = [];
    for await (const batch of reader.batches({
      chunks: [{ file: 'b', offset: 0, numRecords: 32 }],
      epoch: 0,
      taskId: 0,
    })) {
      held.push({ batch, bytes: [...batch.featureBytes!] });
      buffers.add(batch.featureBytes!.buffer);
      for (const h of held.slice(-3)) expect([...h.batch.featureBytes!]).toEqual(h.bytes);
    }
    expect(held.map((h) => h.bytes[0])).toEqual(Array.from({ length: 16 }, (_, i) => 2 * i));
    expect(buffers.size).toBe(4);
  });

  it('minibatch reader - a task that starts takes back every array the last one handed out', async () => {
    const { chunks, readChunk } = fakeChunks([6]);
    const reader = new MinibatchReader({ batchSize: 2, layout: LAYOUT, readChunk });
    const first: Batch[] = [];
    for await (const batch of reader.batches({ chunks, epoch: 0, taskId: 0 })) first.push(batch);
    const second: Batch[] = [];
    for await (const batch of reader.batches({ chunks, epoch: 1, taskId: 0 })) second.push(batch);
    expect(new Set(second.map((b) => b.features.buffer))).toEqual(new Set(first.map((b) => b.features.buffer)));
    expect(second.flatMap((b) => [...b.labels])).toEqual([0, 1, 2, 3, 4, 5]);
  });

  it('minibatch reader - the next chunk is read while the one before is in use; a bad one fails when reached', async () => {
    for (const shuffle of [undefined, { seed: 3, bufferRecords: 2 }]) {
      const { chunks, readChunk } = fakeChunks([4, 4, 4]);
      const asked: number[] = [];
      const reader = new MinibatchReader({
        batchSize: 2,
        layout: LAYOUT,
        shuffle,
        readChunk: (file, offset) => {
          asked.push(offset);
          return offset === 200 ? Promise.reject(new Error('EIO: i/o error')) : readChunk(file, offset);
        },
      });
      const batches = reader.batches({ chunks, epoch: 0, taskId: 0 });
      await batches.next();
      // The first batch came out of chunk 0; chunk 1 is already asked for, chunk 2 not yet.
      expect(asked).toEqual([0, 100]);
      let taken = 1;
      const err = await (async () => {
        for (;;) {
          const item = await batches.next();
          if (item.done) return undefined;
          taken += 1;
        }
      })().catch((e: unknown) => e);
      // Chunk 2's failure came only after the eight records of chunks 0 and 1 (less the two the
      // shuffle buffer still held).
      expect(err).toBeInstanceOf(TaskDataError);
      expect((err as Error).message).toBe('f2: chunk at byte 200: EIO: i/o error');
      expect(taken).toBe(shuffle ? 3 : 4);
      expect(asked).toEqual([0, 100, 200]);
    }
  });

  it('minibatch reader - a chunk with one bad record fails before any of its examples comes out', async () => {
    for (const shuffle of [undefined, { seed: 5, bufferRecords: 2 }, { seed: 5 }]) {
      const { chunks, readChunk } = fakeChunks([4, 4]);
      const reader = new MinibatchReader({
        batchSize: 2,
        layout: LAYOUT,
        shuffle,
        readChunk: async (file, offset) => {
          const { records } = await readChunk(file, offset);
          if (offset !== 100) return { records };
          // Chunk 1's last record holds three features where the layout has two.
          return { records: [...records.slice(0, 3), encodeRecord([7, 7, 7], 7, { ...LAYOUT, featureShape: [3] })] };
        },
      });
      const labels: number[] = [];
      const err = await (async () => {
        for await (const b of reader.batches({ chunks, epoch: 0, taskId: 0 })) labels.push(...b.labels);
      })().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(TaskDataError);
      expect((err as Error).message).toMatch(/^f1: chunk at byte 100: record 3 of the batch has dims \[3\]/);
      // Only chunk 0's examples (labels 0 to 3) came out, less those the shuffle buffer still held.
      expect(labels.every((label) => label < 4)).toBe(true);
      expect(labels).toHaveLength(shuffle === undefined ? 4 : shuffle.bufferRecords === 2 ? 2 : 0);
    }
  });

  it('minibatch reader - a first chunk read ahead is used once, by the task that starts with it', async () => {
    for (const shuffle of [undefined, { seed: 3 }]) {
      const { chunks, readChunk } = fakeChunks([3, 2, 4]);
      // Without the chunk cache, which would answer the second reads.
      const { reader, asked } = recordingReader(readChunk, { shuffle, cacheBytes: 0 });
      const expected = await labelOrder(new MinibatchReader({ batchSize: 2, layout: LAYOUT, shuffle, readChunk }), [
        chunks[1]!,
        chunks[2]!,
      ]);

      // Read before the task starts, and not read again when it does; same minibatches as without.
      reader.readAhead({ chunks: [chunks[1]!, chunks[2]!], epoch: 0, taskId: 0 });
      expect(asked).toEqual([100]);
      expect(await labelOrder(reader, [chunks[1]!, chunks[2]!])).toEqual(expected);
      expect(asked).toEqual([100, 200]);

      // Used once: the same task again reads its chunk again.
      await labelOrder(reader, [chunks[1]!]);
      expect(asked).toEqual([100, 200, 100]);

      // A read ahead for another task is dropped by the task that comes instead.
      reader.readAhead({ chunks: [chunks[2]!], epoch: 0, taskId: 0 });
      expect((await labelOrder(reader, [chunks[0]!])).sort((a, b) => a - b)).toEqual([0, 1, 2]);
      await labelOrder(reader, [chunks[2]!]);
      expect(asked).toEqual([100, 200, 100, 200, 0, 200]);
    }
  });

  /** Lets `turns` turns of the event loop go by. */
  async function turns(count: number): Promise<void> {
    for (let i = 0; i < count; i++) await new Promise((r) => setImmediate(r));
  }

  /** A promise and its resolver: what the trainer waits on while minibatches are prepared. */
  function waitOn(): { busy: Promise<void>; settle: () => void } {
    let settle!: () => void;
    const busy = new Promise<void>((resolve) => (settle = resolve));
    return { busy, settle };
  }

  /**
   * Reads `next` ahead and has `reader` prepare it while the trainer waits, for `count` turns of
   * the event loop; returns what ends the wait.
   */
  async function prepareDuringWait(reader: MinibatchReader, next: TaskData, count = 30): Promise<() => void> {
    reader.readAhead(next);
    const { busy, settle } = waitOn();
    reader.prepareWhile(busy);
    await turns(count);
    return settle;
  }

  it("minibatch reader - minibatches prepared while waiting are the next task's own, in order, each chunk read once", async () => {
    for (const shuffle of [undefined, { seed: 5 }]) {
      const { chunks, readChunk } = fakeChunks([3, 2, 4, 1]);
      const { reader, asked } = recordingReader(readChunk, { shuffle });
      const next = { chunks: [chunks[1]!, chunks[2]!, chunks[3]!], epoch: 2, taskId: 7 };
      const expected = await collect(
        new MinibatchReader({ batchSize: 2, layout: LAYOUT, shuffle, readChunk }),
        next.chunks,
        next,
      );

      const settle = await prepareDuringWait(reader, next, 50);
      // Every chunk was read while waiting (the whole task fits the default budget).
      expect(asked).toEqual([100, 200, 300]);
      settle();
      expect(await collect(reader, next.chunks, next)).toEqual(expected);
      expect(asked).toEqual([100, 200, 300]);
    }
  });

  it('minibatch reader - during a wait mid-task the rest of the task is prepared, then the next task', async () => {
    const { chunks, readChunk } = fakeChunks([2, 2, 2, 2]);
    const { reader, asked } = recordingReader(readChunk);
    const task = { chunks: [chunks[0]!, chunks[1]!], epoch: 0, taskId: 0 };
    const next = { chunks: [chunks[2]!, chunks[3]!], epoch: 0, taskId: 1 };
    const batches = reader.batches(task);
    const first = await batches.next();
    expect([...first.value!.labels]).toEqual([0, 1]);
    const settle = await prepareDuringWait(reader, next);
    // The task's second chunk, the next task's first (read ahead) and its second.
    expect(asked).toEqual([0, 100, 200, 300]);
    settle();
    const rest: number[] = [];
    for await (const b of batches) rest.push(...b.labels);
    expect(rest).toEqual([2, 3]);
    expect(await labelOrder(reader, next.chunks, next)).toEqual([4, 5, 6, 7]);
    expect(asked).toEqual([0, 100, 200, 300]);
  });

  it('minibatch reader - preparing stops when the wait ends or the memory for it is full', async () => {
    const { chunks, readChunk } = fakeChunks([2, 2, 2, 2, 2, 2]);
    const next = { chunks, epoch: 0, taskId: 1 };

    // A wait already over prepares nothing: only the first chunk was read, by readAhead.
    const { reader: over, asked } = recordingReader(readChunk);
    over.readAhead(next);
    over.prepareWhile(Promise.resolve());
    await turns(30);
    expect(asked).toEqual([0]);
    expect((await labelOrder(over, chunks, next)).length).toBe(12);

    // Room for two minibatches of 2 examples of 2 float32 features: two chunks, and the one
    // read ahead of the second.
    const { reader: small, asked: askedSmall } = recordingReader(readChunk, { preparedBytes: 2 * 2 * 2 * 4 });
    const settle = await prepareDuringWait(small, next);
    expect(askedSmall).toEqual([0, 100, 200]);
    settle();
    expect(await labelOrder(small, chunks, next)).toEqual(Array.from({ length: 12 }, (_, n) => n));
  });

  it('minibatch reader - what was prepared for a task that does not come is dropped', async () => {
    for (const shuffle of [undefined, { seed: 9 }]) {
      const { chunks, readChunk } = fakeChunks([3, 2, 4]);
      const fresh = () => new MinibatchReader({ batchSize: 2, layout: LAYOUT, shuffle, readChunk });
      const reader = fresh();
      const planned = { chunks: [chunks[1]!, chunks[2]!], epoch: 0, taskId: 1 };
      const instead = { chunks: [chunks[0]!], epoch: 0, taskId: 2 };
      const settle = await prepareDuringWait(reader, planned, 20);
      settle();
      expect(await collect(reader, instead.chunks, instead)).toEqual(await collect(fresh(), instead.chunks, instead));
      // The same chunks as another task (another epoch): their own order, not the prepared one.
      const later = { ...planned, epoch: 1 };
      expect(await collect(reader, later.chunks, later)).toEqual(await collect(fresh(), later.chunks, later));
    }
  });

  it('minibatch reader - a read that fails while preparing fails the task where it reaches that chunk', async () => {
    const { chunks, readChunk } = fakeChunks([2, 2, 2]);
    const reader = new MinibatchReader({
      batchSize: 2,
      layout: LAYOUT,
      readChunk: async (file, offset) => {
        if (offset === 100) throw new Error('EIO: i/o error');
        return readChunk(file, offset);
      },
    });
    const next = { chunks, epoch: 0, taskId: 0 };
    const settle = await prepareDuringWait(reader, next, 20);
    settle();
    const labels: number[] = [];
    const err = await (async () => {
      for await (const b of reader.batches(next)) labels.push(...b.labels);
    })().catch((e: unknown) => e);
    expect(labels).toEqual([0, 1]);
    expect(err).toBeInstanceOf(TaskDataError);
    expect((err as Error).message).toContain('f1: chunk at byte 100: EIO: i/o error');
  });

  it('minibatch reader - a read ahead that fails is reported when its task reaches the chunk', async () => {
    const reader = new MinibatchReader({
      batchSize: 2,
      layout: LAYOUT,
      readChunk: async () => {
        throw new Error('EIO: i/o error');
      },
    });
    const chunk = { file: '/data/x.recordio', offset: 64, numRecords: 1 };
    reader.readAhead({ chunks: [chunk], epoch: 0, taskId: 0 });
    await new Promise((r) => setImmediate(r));
    await expect(collect(reader, [chunk])).rejects.toThrow('/data/x.recordio: chunk at byte 64: EIO: i/o error');
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

  it('minibatch reader - chunks read in one epoch come from memory in the next, as the same minibatches', async () => {
    for (const shuffle of [undefined, { seed: 5 }]) {
      const { chunks, readChunk } = fakeChunks([3, 2, 4]);
      const { reader, asked } = recordingReader(readChunk, { shuffle });
      const uncached = recordingReader(readChunk, { shuffle, cacheBytes: 0 });
      for (const epoch of [0, 1, 2]) {
        const where = { epoch, taskId: 7 };
        expect(await collect(reader, chunks, where)).toEqual(await collect(uncached.reader, chunks, where));
      }
      expect(asked).toEqual([0, 100, 200]);
      expect(uncached.asked).toHaveLength(9);
      expect(reader.cacheStats()).toMatchObject({ hits: 6, misses: 3, entries: 3, evictions: 0 });
    }
  });

  it('minibatch reader - a chunk whose read failed is read again; a kept one is still held to the task', async () => {
    const { chunks, readChunk } = fakeChunks([3]);
    let fail = true;
    const { reader, asked } = recordingReader(async (file, offset) => {
      if (fail) throw new Error('EIO: i/o error, read');
      return readChunk(file, offset);
    });
    await expect(collect(reader, chunks)).rejects.toThrow(/f0: chunk at byte 0: EIO/);
    fail = false;
    expect((await collect(reader, chunks)).flatMap((b) => b.labels)).toEqual([0, 1, 2]);
    expect(asked).toEqual([0, 0]);
    await expect(collect(reader, [{ ...chunks[0]!, numRecords: 2 }])).rejects.toThrow(
      /f0: chunk at byte 0: holds 3 records but the task says 2/,
    );
    expect(asked).toEqual([0, 0]);
  });

  it('minibatch reader - beyond its memory for chunks the reader reads them again', async () => {
    const { chunks, readChunk } = fakeChunks([3, 3, 3]);
    // Room for two of the chunks, each of which lies in buffers of its own.
    const own: ChunkSource = async (file, offset) => ({
      records: (await readChunk(file, offset)).records.map((r) => r.slice()),
    });
    const one = (await own('f0', 0)).records.reduce((n, r) => n + r.buffer.byteLength, 0) + 3 * 8;
    const { reader, asked } = recordingReader(own, { cacheBytes: 2 * one });
    for (const epoch of [0, 1]) await collect(reader, chunks, { epoch, taskId: 0 });
    // 0 and 1 were kept, then 2 pushed 0 out, which pushed 1 out, and so on.
    expect(asked).toEqual([0, 100, 200, 0, 100, 200]);
    await collect(reader, [chunks[1]!, chunks[2]!]);
    expect(asked).toHaveLength(6);
    expect(reader.cacheStats()).toMatchObject({ entries: 2, bytes: 2 * one });
  });

  it('minibatch reader - its assembly time counts the minibatch code, ahead of the loop too, not the waits for chunks', async () => {
    const { chunks, readChunk } = fakeChunks([4000, 4000, 4000]);
    // Reads far slower than assembling all 12,000 examples, so that a busy machine's pauses,
    // which the assembly time counts (it is wall-clock time), cannot bring the two together.
    const readMs = 300;
    const slowDisk: ChunkSource = async (file, offset) => {
      await new Promise((resolve) => setTimeout(resolve, readMs));
      return readChunk(file, offset);
    };
    for (const shuffle of [undefined, { seed: 3 }]) {
      const reader = new MinibatchReader({ batchSize: 64, layout: LAYOUT, readChunk: slowDisk, shuffle });
      expect(reader.assemblyMs).toBe(0);
      const started = performance.now();
      const task = { chunks, epoch: 0, taskId: 0 };
      expect((await labelOrder(reader, chunks, task)).length).toBe(12_000);
      const read = reader.assemblyMs;
      // Three reads were waited for; 12,000 examples went into minibatches meanwhile.
      expect(performance.now() - started).toBeGreaterThanOrEqual(3 * readMs);
      expect(read).toBeGreaterThan(0);
      expect(read).toBeLessThan(readMs);
      // Minibatches assembled ahead, while the loop waits on the network, count too.
      const settle = await prepareDuringWait(reader, { chunks, epoch: 1, taskId: 0 }, 10);
      expect(reader.assemblyMs).toBeGreaterThan(read);
      settle();
    }
  });
});
