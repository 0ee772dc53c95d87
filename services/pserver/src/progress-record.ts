import { readFileSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { join } from 'node:path';
import { crc32, writeFileAtomicallySync } from '#libs/file-integrity';

/**
 * A job shard's progress record: its version and its synchronous quorum, rewritten on every step
 * and every membership change, next to the job's checkpoints.
 *
 * Checkpoints are taken every few steps or seconds; this record is what keeps a shard's version
 * from going back when it restarts from one: see `shard-recovery.ts` for how a resumed shard
 * uses it. It is a few hundred bytes, written synchronously before the new version or
 * member is visible to anyone (a new file, then an atomic rename over the old one), so it
 * survives the process being killed at any point. It is fsynced with every checkpoint rather
 * than on every step: a machine that loses power may come back with the version of its last
 * checkpoint.
 *
 * File `progress.json`: `{"format":1,"jobId",...,"crc32":N}`, the CRC-32 taken over the JSON of
 * the fields before it, so a torn or edited file is detected and ignored.
 */

/** Name of the progress record in a job's checkpoint directory. */
export const PROGRESS_RECORD_FILE = 'progress.json';

const FORMAT = 1;

/** A member of the synchronous quorum as recorded. */
export interface RecordedMember {
  trainerId: string;
  /** The first version whose step waits for this member. */
  countedFrom: number;
}

/** What the progress record holds. */
export interface ProgressRecord {
  jobId: string;
  shard: number;
  /** The shard's version; every version a client may have seen is at most this. */
  version: number;
  members: RecordedMember[];
}

function bodyOf(record: ProgressRecord): string {
  return JSON.stringify({
    format: FORMAT,
    jobId: record.jobId,
    shard: record.shard,
    version: record.version,
    members: record.members.map((m) => ({ trainerId: m.trainerId, countedFrom: m.countedFrom })),
  });
}

/** The record's bytes: its JSON with the CRC-32 of the fields appended as a last field. */
export function encodeProgressRecord(record: ProgressRecord): Buffer {
  const body = bodyOf(record);
  return Buffer.from(`${body.slice(0, -1)},"crc32":${crc32(Buffer.from(body, 'utf8'))}}\n`, 'utf8');
}

/** Parses and checks a record; throws an `Error` saying what is wrong. */
export function decodeProgressRecord(bytes: Uint8Array): ProgressRecord {
  const parsed = JSON.parse(Buffer.from(bytes).toString('utf8')) as Record<string, unknown>;
  const { crc32: stored, ...rest } = parsed;
  if (rest.format !== FORMAT) throw new Error(`unknown format ${JSON.stringify(rest.format)}`);
  const members = rest.members;
  if (
    typeof rest.jobId !== 'string' ||
    typeof rest.shard !== 'number' ||
    typeof rest.version !== 'number' ||
    !Number.isInteger(rest.version) ||
    rest.version < 0 ||
    !Array.isArray(members) ||
    !members.every(
      (m: { trainerId?: unknown; countedFrom?: unknown }) =>
        typeof m?.trainerId === 'string' && typeof m.countedFrom === 'number',
    )
  ) {
    throw new Error('fields missing or of the wrong type');
  }
  const record = rest as unknown as ProgressRecord;
  const computed = crc32(Buffer.from(bodyOf(record), 'utf8'));
  if (stored !== computed) throw new Error(`CRC-32 mismatch: stored ${String(stored)}, computed ${computed}`);
  return { jobId: record.jobId, shard: record.shard, version: record.version, members: record.members };
}

/**
 * Replaces the record in `dir` (which must exist) synchronously: a new file, then a rename over
 * the old one, so a reader finds either record whole. With `durable`, the new file is fsynced
 * first and the directory after.
 */
export function writeProgressRecord(dir: string, record: ProgressRecord, durable = false): void {
  writeFileAtomicallySync(join(dir, PROGRESS_RECORD_FILE), encodeProgressRecord(record), { durable });
}

/**
 * Reads the record in `dir`: undefined when there is none; an `Error` naming the file when it
 * is damaged.
 */
export function readProgressRecord(dir: string): ProgressRecord | undefined {
  const path = join(dir, PROGRESS_RECORD_FILE);
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  try {
    return decodeProgressRecord(bytes);
  } catch (cause) {
    throw new Error(`progress record ${path} is damaged: ${(cause as Error).message}`, { cause });
  }
}

/**
 * Flushes the record in `dir` and the directory entry naming it to disk (after a checkpoint, so
 * the record is at least as durable as the checkpoint). A missing record is not an error.
 */
export async function syncProgressRecord(dir: string): Promise<void> {
  for (const [path, flags] of [
    [join(dir, PROGRESS_RECORD_FILE), 'r'],
    [dir, 'r'],
  ] as const) {
    let fh;
    try {
      fh = await open(path, flags);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue;
      throw err;
    }
    try {
      await fh.sync();
    } finally {
      await fh.close();
    }
  }
}
