/**
 * `#libs/file-integrity`: files that are never seen half written, and telling a whole file from
 * a damaged one. {@link writeFileAtomically} (and its blocking twin) replaces a file through a
 * temporary and a rename, optionally fsynced; {@link crc32} checksums bytes on disk (RecordIO
 * chunks, checkpoints, progress records).
 */
export { crc32 } from './crc32.js';
export { writeFileAtomically, writeFileAtomicallySync } from './atomic-file-write.js';

export type { AtomicWriteOptions } from './atomic-file-write.js';
