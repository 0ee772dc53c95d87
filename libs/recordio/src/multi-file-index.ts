/** Datasets spread over many files: glob expansion and one global, ordered chunk list. */
import path from 'node:path';
import { glob } from 'tinyglobby';
import { type ChunkIndex, type ChunkMeta, loadIndex } from './chunk-index.js';
import { NoMatchingFilesError } from './errors.js';

/** How many files {@link indexFiles} indexes at the same time. */
export const INDEX_CONCURRENCY_FILES = 8;

/** One chunk of a multi-file dataset: where it is, and its place in the whole dataset. */
export interface GlobalChunkMeta extends ChunkMeta {
  /** The file holding the chunk (absolute path). */
  readonly file: string;
  /** Position of the chunk among the chunks of its file (0-based). */
  readonly chunkIndexInFile: number;
  /** Index of the chunk's first record among all records of the dataset. */
  readonly globalFirstRecord: number;
}

/** The chunks of all files of a dataset, files in sorted order, chunks in file order. */
export interface MultiFileIndex {
  /** The files, sorted and without duplicates. */
  readonly files: readonly string[];
  /** The index of each file, in the order of `files`. */
  readonly fileIndexes: readonly ChunkIndex[];
  /** Every chunk of every file, in file order and then chunk order. */
  readonly chunks: readonly GlobalChunkMeta[];
  /** Number of chunks in all files. */
  readonly totalChunks: number;
  /** Number of records in all files. */
  readonly totalRecords: number;
}

/** Options of {@link expandPatterns} and {@link indexFiles}. */
export interface ExpandOptions {
  /** Directory that relative patterns are resolved against; the process's by default. */
  readonly cwd?: string;
}

/** Compares strings by UTF-16 code units, so the order does not depend on the locale. */
function compareCodeUnits(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * Expands glob patterns (`data/train-*.recordio`, or plain paths) into the absolute paths of the
 * regular files they match, sorted and without duplicates.
 * @throws NoMatchingFilesError naming the first pattern that matches no file.
 */
export async function expandPatterns(patterns: readonly string[], options: ExpandOptions = {}): Promise<string[]> {
  const cwd = path.resolve(options.cwd ?? process.cwd());
  const matches = await Promise.all(
    patterns.map((pattern) => glob([pattern], { cwd, absolute: true, expandDirectories: false, onlyFiles: true })),
  );
  const files = new Set<string>();
  matches.forEach((found, i) => {
    if (found.length === 0) throw new NoMatchingFilesError(patterns[i]!);
    for (const file of found) files.add(path.normalize(file));
  });
  return [...files].sort(compareCodeUnits);
}

/** Runs `work` over `items` with at most `limit` calls in flight, keeping the results in order. */
async function mapLimited<T, R>(items: readonly T[], limit: number, work: (item: T) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let nextItem = 0;
  const worker = async (): Promise<void> => {
    while (nextItem < items.length) {
      const i = nextItem++;
      results[i] = await work(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}

/** Joins the indexes of several files, in the given order, into one global chunk list. */
export function combineIndexes(fileIndexes: readonly ChunkIndex[]): MultiFileIndex {
  const chunks: GlobalChunkMeta[] = [];
  let totalRecords = 0;
  for (const index of fileIndexes) {
    index.chunks.forEach((meta, chunkIndexInFile) => {
      chunks.push({ ...meta, file: index.file, chunkIndexInFile, globalFirstRecord: totalRecords + meta.firstRecord });
    });
    totalRecords += index.totalRecords;
  }
  return {
    files: fileIndexes.map((index) => index.file),
    fileIndexes,
    chunks,
    totalChunks: chunks.length,
    totalRecords,
  };
}

/**
 * Expands `patterns` (see {@link expandPatterns}) and indexes every file, giving the global chunk
 * list a master cuts into tasks; a trainer then reads each chunk with `readChunkAt(file, offset)`.
 * @throws NoMatchingFilesError for a pattern that matches nothing, and the `ChunkError` of the
 *   first file with a bad header.
 */
export async function indexFiles(patterns: readonly string[], options: ExpandOptions = {}): Promise<MultiFileIndex> {
  return indexFileList(await expandPatterns(patterns, options));
}

/**
 * Indexes files already expanded (see {@link expandPatterns}), in the given order, for a caller
 * that checks the matches before any is opened.
 * @throws the `ChunkError` of the first file with a bad header.
 */
export async function indexFileList(files: readonly string[]): Promise<MultiFileIndex> {
  return combineIndexes(await mapLimited(files, INDEX_CONCURRENCY_FILES, loadIndex));
}
