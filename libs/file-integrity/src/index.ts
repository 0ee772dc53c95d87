/**
 * `#libs/file-integrity`: telling a whole file from a damaged one. {@link crc32} checksums bytes
 * on disk (RecordIO chunks, checkpoints, progress records).
 */
export { crc32 } from './crc32.js';
