import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { HEADER_SIZE_BYTES } from './chunk-header.js';
import { type ChunkIndex, loadIndex, readChunk } from './chunk-index.js';
import { readChunkAt } from './chunk-reader.js';
import { Compressor } from './compressor.js';
import {
  BadMagicError,
  ChecksumMismatchError,
  type ChunkError,
  CorruptChunkError,
  TruncatedChunkError,
  UnknownCompressorError,
} from './errors.js';
import { RangeReader } from './range-reader.js';
import { scanRecords } from './record-scanner.js';
import { writeRecordFile } from './record-writer.js';

const text = (value: string): Uint8Array => new TextEncoder().encode(value);

/** Three chunks: ["aaaa", "bbbb"], ["cccc", "dddd"], ["eeee", "ffff"]. */
const RECORDS = ['aaaa', 'bbbb', 'cccc', 'dddd', 'eeee', 'ffff'].map(text);

type ErrorClass = new (...args: never[]) => ChunkError;

/** Runs `action`, expecting a `ChunkError` of class `kind` that names `file` and `offset`. */
async function expectChunkError(
  action: () => Promise<unknown>,
  kind: ErrorClass,
  file: string,
  offset: number,
): Promise<ChunkError> {
  let caught: unknown;
  try {
    await action();
  } catch (error) {
    caught = error;
  }
  expect(caught).toBeInstanceOf(kind);
  const error = caught as ChunkError;
  expect(error.file).toBe(file);
  expect(error.offset).toBe(offset);
  expect(error.message).toContain(file);
  expect(error.message).toContain(`at byte ${offset}`);
  return error;
}

async function scanAll(file: string, seen: Uint8Array[] = []): Promise<Uint8Array[]> {
  for await (const record of scanRecords(file)) seen.push(record);
  return seen;
}

describe('recordio corruption', () => {
  let dir: string;
  let counter = 0;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'recordio-corruption-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  /** Writes RECORDS with `compressor`, lets `corrupt` edit the bytes, and returns the file and its original index. */
  async function corruptedFile(
    compressor: Compressor,
    corrupt: (bytes: Buffer, index: ChunkIndex) => Buffer | void,
  ): Promise<{ file: string; index: ChunkIndex }> {
    const file = path.join(dir, `corrupt-${counter++}.recordio`);
    await writeRecordFile(file, RECORDS, { maxChunkSizeBytes: 8, compressor });
    const index = await loadIndex(file);
    expect(index.totalChunks).toBe(3);
    const bytes = await readFile(file);
    await writeFile(file, corrupt(bytes, index) ?? bytes);
    return { file, index };
  }

  /** Recomputes the outer CRC-32 of the chunk at `offset` after its payload was edited. */
  function resealChunk(bytes: Buffer, offset: number): void {
    const size = bytes.readUInt32LE(offset + 12);
    const payload = bytes.subarray(offset + HEADER_SIZE_BYTES, offset + HEADER_SIZE_BYTES + size);
    bytes.writeUInt32LE(zlib.crc32(payload) >>> 0, offset + 4);
  }

  it('recordio corruption - a flipped magic byte is a BadMagicError at that chunk', async () => {
    const { file, index } = await corruptedFile(Compressor.None, (bytes, idx) => {
      bytes[idx.chunks[1]!.offset + 2]! ^= 0xff;
    });
    const offset = index.chunks[1]!.offset;
    await expectChunkError(() => loadIndex(file), BadMagicError, file, offset);
    await expectChunkError(() => readChunkAt(file, offset), BadMagicError, file, offset);
    const seen: Uint8Array[] = [];
    await expectChunkError(() => scanAll(file, seen), BadMagicError, file, offset);
    expect(seen).toHaveLength(2);
  });

  it('recordio corruption - a flipped payload byte is a ChecksumMismatchError at that chunk', async () => {
    for (const compressor of [Compressor.None, Compressor.Snappy, Compressor.Gzip]) {
      const { file, index } = await corruptedFile(compressor, (bytes, idx) => {
        bytes[idx.chunks[1]!.offset + HEADER_SIZE_BYTES + 5]! ^= 0x01;
      });
      const meta = index.chunks[1]!;
      const error = (await expectChunkError(
        () => readChunkAt(file, meta.offset),
        ChecksumMismatchError,
        file,
        meta.offset,
      )) as ChecksumMismatchError;
      expect(error.stored).toBe(meta.checksum);
      expect(error.computed).not.toBe(meta.checksum);
      expect(error.message).toMatch(/stored 0x[0-9a-f]{8}, computed 0x[0-9a-f]{8}/);
      await expectChunkError(() => readChunk(file, meta), ChecksumMismatchError, file, meta.offset);
      await expectChunkError(() => scanAll(file), ChecksumMismatchError, file, meta.offset);
      const reader = await RangeReader.open(file);
      try {
        expect(await reader.read(0, 2)).toHaveLength(2);
        await expectChunkError(() => reader.read(1, 3), ChecksumMismatchError, file, meta.offset);
      } finally {
        await reader.close();
      }
    }
  });

  it('recordio corruption - an unknown compressor id is an UnknownCompressorError', async () => {
    const { file, index } = await corruptedFile(Compressor.None, (bytes, idx) => {
      bytes.writeUInt32LE(7, idx.chunks[2]!.offset + 8);
    });
    const offset = index.chunks[2]!.offset;
    const error = (await expectChunkError(
      () => loadIndex(file),
      UnknownCompressorError,
      file,
      offset,
    )) as UnknownCompressorError;
    expect(error.compressor).toBe(7);
    await expectChunkError(() => readChunkAt(file, offset), UnknownCompressorError, file, offset);
    await expectChunkError(() => scanAll(file), UnknownCompressorError, file, offset);
  });

  it('recordio corruption - a file cut inside a header is a TruncatedChunkError on the header', async () => {
    const { file, index } = await corruptedFile(Compressor.Snappy, (bytes, idx) =>
      bytes.subarray(0, idx.chunks[2]!.offset + 11),
    );
    const offset = index.chunks[2]!.offset;
    const error = (await expectChunkError(
      () => loadIndex(file),
      TruncatedChunkError,
      file,
      offset,
    )) as TruncatedChunkError;
    expect(error.part).toBe('header');
    expect(error.availableBytes).toBe(11);
    expect(error.message).toContain('header');
    await expectChunkError(() => readChunkAt(file, offset), TruncatedChunkError, file, offset);
    const seen: Uint8Array[] = [];
    await expectChunkError(() => scanAll(file, seen), TruncatedChunkError, file, offset);
    expect(seen).toHaveLength(4);
  });

  it('recordio corruption - a file cut inside a payload is a TruncatedChunkError on the payload', async () => {
    const { file, index } = await corruptedFile(Compressor.Gzip, (bytes) => bytes.subarray(0, bytes.length - 3));
    const meta = index.chunks[2]!;
    const error = (await expectChunkError(
      () => loadIndex(file),
      TruncatedChunkError,
      file,
      meta.offset,
    )) as TruncatedChunkError;
    expect(error.part).toBe('payload');
    expect(error.expectedBytes).toBe(meta.compressedSize);
    expect(error.availableBytes).toBe(meta.compressedSize - 3);
    expect(error.message).toContain('payload');
    await expectChunkError(() => readChunkAt(file, meta.offset), TruncatedChunkError, file, meta.offset);
    await expectChunkError(() => readChunk(file, meta), TruncatedChunkError, file, meta.offset);
    await expectChunkError(() => scanAll(file), TruncatedChunkError, file, meta.offset);
  });

  it('recordio corruption - a bad snappy frame under a correct outer checksum is a CorruptChunkError', async () => {
    // Payload layout: stream identifier (10 bytes), frame header (4), masked CRC-32C (4), data.
    const edits: Record<string, (payload: Buffer) => void> = {
      'frame data': (payload) => {
        payload[10 + 8]! ^= 0x01;
      },
      'frame checksum': (payload) => {
        payload[10 + 4]! ^= 0x01;
      },
      'stream identifier': (payload) => {
        payload[5]! ^= 0x01;
      },
      'unskippable frame type': (payload) => {
        payload[10] = 0x02;
      },
      'frame length': (payload) => {
        payload[11] = 0xff;
      },
    };
    for (const [what, edit] of Object.entries(edits)) {
      const { file, index } = await corruptedFile(Compressor.Snappy, (bytes, idx) => {
        const offset = idx.chunks[1]!.offset;
        edit(bytes.subarray(offset + HEADER_SIZE_BYTES, offset + HEADER_SIZE_BYTES + idx.chunks[1]!.compressedSize));
        resealChunk(bytes, offset);
      });
      const offset = index.chunks[1]!.offset;
      const error = await expectChunkError(() => readChunkAt(file, offset), CorruptChunkError, file, offset);
      expect(error.message).toContain('snappy');
      await expectChunkError(() => scanAll(file), CorruptChunkError, file, offset).catch((cause: unknown) => {
        throw new Error(`corrupted ${what} was not refused by scanRecords`, { cause });
      });
    }
  });

  it('recordio corruption - a compressed snappy frame with a broken block is a CorruptChunkError', async () => {
    const file = path.join(dir, `corrupt-${counter++}.recordio`);
    await writeRecordFile(file, [new Uint8Array(5000).fill(7)], { compressor: Compressor.Snappy });
    const bytes = await readFile(file);
    const block = HEADER_SIZE_BYTES + 10 + 4 + 4;
    expect(bytes[HEADER_SIZE_BYTES + 10]).toBe(0x00);
    // After the two-byte length varint, make the first element a copy reaching before the output's start.
    bytes[block + 2] = 0x01;
    bytes[block + 3] = 0x05;
    resealChunk(bytes, 0);
    await writeFile(file, bytes);
    const error = await expectChunkError(() => readChunkAt(file, 0), CorruptChunkError, file, 0);
    expect(error.message).toContain('bad snappy block');
  });

  it('recordio corruption - bad gzip data under a correct outer checksum is a CorruptChunkError', async () => {
    const { file, index } = await corruptedFile(Compressor.Gzip, (bytes, idx) => {
      const offset = idx.chunks[0]!.offset;
      bytes[offset + HEADER_SIZE_BYTES + idx.chunks[0]!.compressedSize - 6]! ^= 0x10;
      resealChunk(bytes, offset);
    });
    const error = await expectChunkError(() => readChunkAt(file, index.chunks[0]!.offset), CorruptChunkError, file, 0);
    expect(error.message).toContain('gzip');
  });

  it('recordio corruption - a record length that overruns the payload is a CorruptChunkError', async () => {
    const { file, index } = await corruptedFile(Compressor.None, (bytes, idx) => {
      const offset = idx.chunks[2]!.offset;
      bytes.writeUInt32LE(1000, offset + HEADER_SIZE_BYTES + 8);
      resealChunk(bytes, offset);
    });
    const offset = index.chunks[2]!.offset;
    const error = await expectChunkError(() => readChunkAt(file, offset), CorruptChunkError, file, offset);
    expect(error.message).toContain('overruns');
  });

  it('recordio corruption - a record count that disagrees with the payload is a CorruptChunkError', async () => {
    for (const count of [1, 3, 1_000_000]) {
      const { file, index } = await corruptedFile(Compressor.Snappy, (bytes, idx) => {
        bytes.writeUInt32LE(count, idx.chunks[1]!.offset + 16);
      });
      const offset = index.chunks[1]!.offset;
      await expectChunkError(() => readChunkAt(file, offset), CorruptChunkError, file, offset);
      await expectChunkError(() => scanAll(file), CorruptChunkError, file, offset);
    }
  });

  it('recordio corruption - a chunk whose header no longer matches the index is a CorruptChunkError', async () => {
    const file = path.join(dir, `corrupt-${counter++}.recordio`);
    await writeRecordFile(file, RECORDS, { maxChunkSizeBytes: 8, compressor: Compressor.None });
    const index = await loadIndex(file);
    await writeRecordFile(
      file,
      RECORDS.map((r) => text(`${new TextDecoder().decode(r)}!`)),
      { maxChunkSizeBytes: 8, compressor: Compressor.None },
    );
    const error = await expectChunkError(() => readChunk(file, index.chunks[0]!), CorruptChunkError, file, 0);
    expect(error.message).toContain('does not match the index');
  });

  it('recordio corruption - reading at an offset that is not a chunk start is refused', async () => {
    const { file } = await corruptedFile(Compressor.None, () => undefined);
    await expectChunkError(() => readChunkAt(file, 3), BadMagicError, file, 3);
    const size = (await readFile(file)).length;
    await expectChunkError(() => readChunkAt(file, size), TruncatedChunkError, file, size);
  });
});
