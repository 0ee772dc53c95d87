/** Streaming a whole file, chunk by chunk, without building an index first. */
import { open } from 'node:fs/promises';
import { type Chunk, type RawChunk, decodeRawChunk, nextChunkOffset, readRawChunk } from './chunk-reader.js';

/**
 * Yields the chunks of `file` in order, each verified and decoded. While the caller works on one
 * chunk the next one is already being read from disk, so at most two chunks are in memory.
 * @throws the `ChunkError` of the first bad chunk, after yielding the good chunks before it.
 */
export async function* scanChunks(file: string): AsyncGenerator<Chunk, void, undefined> {
  const handle = await open(file, 'r');
  let next: Promise<RawChunk | null> | undefined;
  try {
    next = readRawChunk(handle, file, 0, true);
    for (;;) {
      const raw = await next;
      if (raw === null) return;
      next = readRawChunk(handle, file, nextChunkOffset(raw.offset, raw.header), true);
      // A read error is reported when the loop reaches that chunk, not as an unhandled rejection.
      next.catch(() => undefined);
      yield decodeRawChunk(file, raw);
    }
  } finally {
    await next?.catch(() => undefined);
    await handle.close();
  }
}

/**
 * Iterates over every record of `file` in order, reading and verifying one chunk at a time.
 * Records are views into their chunk's memory (see {@link Chunk.records}). Records of a chunk
 * already read are handed out without going through a generator, which keeps the cost of
 * `for await` per record low.
 * @throws the `ChunkError` of the first bad chunk, after yielding the records before it.
 */
export function scanRecords(file: string): AsyncIterableIterator<Uint8Array> {
  const chunks = scanChunks(file);
  const finished: IteratorReturnResult<undefined> = { done: true, value: undefined };
  let records: readonly Uint8Array[] = [];
  let next = 0;
  let done = false;
  let refilling: Promise<void> | undefined;

  const refill = async (): Promise<void> => {
    while (!done && next >= records.length) {
      const result = await chunks.next();
      if (result.done) {
        done = true;
      } else {
        records = result.value.records;
        next = 0;
      }
    }
  };

  const iterator: AsyncIterableIterator<Uint8Array> = {
    next(): Promise<IteratorResult<Uint8Array>> {
      if (next < records.length) return Promise.resolve({ done: false, value: records[next++]! });
      if (done) return Promise.resolve(finished);
      refilling ??= refill().finally(() => {
        refilling = undefined;
      });
      return refilling.then(() => iterator.next());
    },
    async return(): Promise<IteratorResult<Uint8Array>> {
      done = true;
      records = [];
      await chunks.return(undefined);
      return finished;
    },
    [Symbol.asyncIterator]() {
      return iterator;
    },
  };
  return iterator;
}
