/**
 * `#libs/recordio`: RecordIO files byte-compatible with PaddlePaddle's Go `recordio` package.
 * Write with {@link RecordWriter}; index with {@link loadIndex} or {@link indexFiles}; read a chunk
 * with {@link readChunkAt}, a range with {@link RangeReader}, or everything with {@link scanRecords}.
 */
export { Compressor, DEFAULT_COMPRESSOR, compressorName, isCompressor, parseCompressor } from './compressor.js';
export { HEADER_SIZE_BYTES, MAGIC_NUMBER, parseChunkHeader } from './chunk-header.js';
export { encodeChunk } from './chunk.js';
export { RECORDIO_MAX_CHUNK_SIZE_BYTES, RecordWriter, writeRecordFile } from './record-writer.js';
export { loadIndex, readChunk } from './chunk-index.js';
export { readChunkAt } from './chunk-reader.js';
export { wasmSnappyUnavailableReason } from './wasm/snappy-wasm.js';
export { RangeReader, readRecords } from './range-reader.js';
export { scanChunks, scanRecords } from './record-scanner.js';
export {
  INDEX_CONCURRENCY_FILES,
  combineIndexes,
  expandPatterns,
  indexFileList,
  indexFiles,
} from './multi-file-index.js';
export {
  BadMagicError,
  ChecksumMismatchError,
  ChunkError,
  CorruptChunkError,
  NoMatchingFilesError,
  RecordIOError,
  TruncatedChunkError,
  UnknownCompressorError,
  WriterClosedError,
} from './errors.js';

export type { ChunkHeader } from './chunk-header.js';
export type { RecordSink, RecordWriterOptions } from './record-writer.js';
export type { ChunkIndex, ChunkMeta } from './chunk-index.js';
export type { Chunk } from './chunk-reader.js';
export type { ExpandOptions, GlobalChunkMeta, MultiFileIndex } from './multi-file-index.js';
export type { ChunkLocation, TruncatedPart } from './errors.js';
