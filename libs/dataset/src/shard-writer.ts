import { mkdir, readdir, stat, unlink } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { type Compressor, RecordWriter } from '#libs/recordio';
import { InvalidConvertOptionError } from './errors.js';

/** How a converter lays its records out in RecordIO files. */
export interface ShardOptions {
  /** Shards are written as `<outPrefix>-00000.recordio`, `<outPrefix>-00001.recordio`, ... */
  readonly outPrefix: string;
  /** A new chunk starts when the record bytes in the chunk plus the next record exceed this. */
  readonly maxChunkSizeBytes: number;
  /** Every shard but the last holds exactly this many chunks; the last holds at most this many. */
  readonly chunksPerFile: number;
  readonly compressor: Compressor;
}

/** What a conversion wrote. */
export interface ConversionSummary {
  /** The shard files, in order. */
  readonly files: readonly string[];
  readonly records: number;
  readonly chunks: number;
  /** Total size of the shard files on disk. */
  readonly bytes: number;
}

const SHARD_SUFFIX = '.recordio';
const SHARD_INDEX_DIGITS = 5;

/** Path of shard number `index` for `outPrefix`. */
export function shardPath(outPrefix: string, index: number): string {
  return `${outPrefix}-${String(index).padStart(SHARD_INDEX_DIGITS, '0')}${SHARD_SUFFIX}`;
}

/** Checks the layout options, naming the first bad one. */
export function validateShardOptions(options: ShardOptions): void {
  if (options.outPrefix.length === 0) throw new InvalidConvertOptionError('outPrefix must not be empty');
  if (!Number.isSafeInteger(options.maxChunkSizeBytes) || options.maxChunkSizeBytes <= 0) {
    throw new InvalidConvertOptionError(
      `maxChunkSizeBytes must be a positive integer, got ${options.maxChunkSizeBytes}`,
    );
  }
  if (!Number.isSafeInteger(options.chunksPerFile) || options.chunksPerFile <= 0) {
    throw new InvalidConvertOptionError(`chunksPerFile must be a positive integer, got ${options.chunksPerFile}`);
  }
}

/** Removes shards left by an earlier conversion to the same prefix (names `<prefix>-NNNNN.recordio` only). */
async function removeOldShards(outPrefix: string): Promise<void> {
  const dir = dirname(outPrefix);
  const stem = basename(outPrefix);
  const pattern = new RegExp(`^${stem.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}-\\d{${SHARD_INDEX_DIGITS}}\\.recordio$`);
  for (const name of await readdir(dir)) {
    if (pattern.test(name)) await unlink(join(dir, name));
  }
}

/**
 * Writes records into a sequence of RecordIO shards, rolling to a new file at a chunk boundary
 * once the current file holds `chunksPerFile` chunks. It follows the writer's own rule to know
 * where chunks end: a new chunk starts before a record when the chunk is not empty and
 * `bytesInChunk + record.length > maxChunkSizeBytes`.
 *
 * Shards of an earlier conversion to the same prefix are removed when the first record arrives,
 * so a glob over the prefix never mixes old and new shards.
 */
export class ShardedRecordWriter {
  private writer: RecordWriter | undefined;
  private readonly files: string[] = [];
  private chunksInFile = 0;
  private bytesInChunk = 0;
  private recordsInChunk = 0;
  private chunks = 0;
  private records = 0;

  constructor(private readonly options: ShardOptions) {
    validateShardOptions(options);
  }

  /** Appends one record, opening a new shard first when the record starts a chunk that the current shard has no room for. */
  async write(record: Uint8Array): Promise<void> {
    const { maxChunkSizeBytes, chunksPerFile } = this.options;
    if (this.writer === undefined) {
      await this.openShard(true);
    } else if (this.recordsInChunk > 0 && this.bytesInChunk + record.length > maxChunkSizeBytes) {
      if (this.chunksInFile === chunksPerFile) {
        await this.writer.close();
        await this.openShard(false);
      } else {
        this.chunksInFile++;
        this.chunks++;
      }
      this.bytesInChunk = 0;
      this.recordsInChunk = 0;
    }
    await this.writer!.write(record);
    this.bytesInChunk += record.length;
    this.recordsInChunk++;
    this.records++;
  }

  /** Flushes and closes the last shard; returns what was written. */
  async close(): Promise<ConversionSummary> {
    if (this.writer === undefined && this.files.length === 0) {
      // No records: still clear old shards so the prefix does not describe stale data.
      await mkdir(dirname(this.options.outPrefix), { recursive: true });
      await removeOldShards(this.options.outPrefix);
    }
    await this.writer?.close();
    this.writer = undefined;
    let bytes = 0;
    for (const file of this.files) bytes += (await stat(file)).size;
    return { files: [...this.files], records: this.records, chunks: this.chunks, bytes };
  }

  private async openShard(first: boolean): Promise<void> {
    const { outPrefix, maxChunkSizeBytes, compressor } = this.options;
    if (first) {
      await mkdir(dirname(outPrefix), { recursive: true });
      await removeOldShards(outPrefix);
    }
    const file = shardPath(outPrefix, this.files.length);
    this.files.push(file);
    this.writer = await RecordWriter.open(file, { maxChunkSizeBytes, compressor });
    this.chunksInFile = 1;
    this.chunks++;
  }
}
