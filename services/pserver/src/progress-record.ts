import { closeSync, fsyncSync, openSync, readFileSync, writeSync } from 'node:fs';
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

const FORMAT = 2;
/** The format of a record file of one record, without `seq`; still read. */
const SINGLE_RECORD_FORMAT = 1;
/** Bytes of each of the file's two slots, unless a record needs more. */
export const PROGRESS_SLOT_BYTES = 4096;

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

/** A record as kept in a slot: with the number of the write that put it there. */
interface SlotRecord extends ProgressRecord {
  seq: number;
}

function bodyOf(record: ProgressRecord, seq?: number): string {
  return JSON.stringify({
    format: seq === undefined ? SINGLE_RECORD_FORMAT : FORMAT,
    ...(seq === undefined ? {} : { seq }),
    jobId: record.jobId,
    shard: record.shard,
    version: record.version,
    members: record.members.map((m) => ({ trainerId: m.trainerId, countedFrom: m.countedFrom })),
  });
}

/**
 * The record's bytes: its JSON (with `seq` when given: a slot's record) with the CRC-32 of the
 * fields appended as a last field, and a newline.
 */
export function encodeProgressRecord(record: ProgressRecord, seq?: number): Buffer {
  const body = bodyOf(record, seq);
  return Buffer.from(`${body.slice(0, -1)},"crc32":${crc32(Buffer.from(body, 'utf8'))}}\n`, 'utf8');
}

/** Parses and checks a record; throws an `Error` saying what is wrong. */
export function decodeProgressRecord(bytes: Uint8Array): ProgressRecord {
  return withoutSeq(decodeSlot(bytes));
}

function withoutSeq(slot: SlotRecord): ProgressRecord {
  return { jobId: slot.jobId, shard: slot.shard, version: slot.version, members: slot.members };
}

/** Parses and checks one record of either format; `seq` is 0 for a single-record file. */
function decodeSlot(bytes: Uint8Array): SlotRecord {
  const parsed = JSON.parse(Buffer.from(bytes).toString('utf8')) as Record<string, unknown>;
  const { crc32: stored, ...rest } = parsed;
  if (rest.format !== FORMAT && rest.format !== SINGLE_RECORD_FORMAT) {
    throw new Error(`unknown format ${JSON.stringify(rest.format)}`);
  }
  const seq = rest.format === FORMAT ? rest.seq : undefined;
  const members = rest.members;
  if (
    (rest.format === FORMAT && !(typeof seq === 'number' && Number.isInteger(seq) && seq > 0)) ||
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
  const computed = crc32(Buffer.from(bodyOf(record, seq as number | undefined), 'utf8'));
  if (stored !== computed) throw new Error(`CRC-32 mismatch: stored ${String(stored)}, computed ${computed}`);
  return {
    seq: (seq as number | undefined) ?? 0,
    jobId: record.jobId,
    shard: record.shard,
    version: record.version,
    members: record.members,
  };
}

/** The first line of `bytes` from `start` (without its newline), or up to `end`. */
function lineAt(bytes: Buffer, start: number, end: number): Buffer {
  const newline = bytes.indexOf(0x0a, start);
  return bytes.subarray(start, newline < 0 || newline > end ? end : newline);
}

/**
 * The record of a file's bytes: the intact slot with the higher `seq`, or the file's one record.
 * @throws Error saying what is wrong with the first slot when no slot is intact.
 */
function recordOfFile(bytes: Buffer): ProgressRecord {
  const candidates = [lineAt(bytes, 0, bytes.length)];
  if (bytes.length % 2 === 0 && bytes.length > 0) candidates.push(lineAt(bytes, bytes.length / 2, bytes.length));
  let best: SlotRecord | undefined;
  let firstError: Error | undefined;
  for (const candidate of candidates) {
    try {
      const slot = decodeSlot(candidate);
      if (best === undefined || slot.seq > best.seq) best = slot;
    } catch (err) {
      firstError ??= err as Error;
    }
  }
  if (best === undefined) throw firstError!;
  return withoutSeq(best);
}

/**
 * Keeps one job's progress record current in its directory: the first write creates the file
 * (both slots holding the record; a new file and a rename, so an older file is replaced whole),
 * every later one overwrites the older slot in place. `close` when the job is dropped.
 */
export class ProgressRecordFile {
  private fd: number | undefined;
  private slotBytes = 0;
  private seq = 0;

  constructor(private readonly dir: string) {}

  /** Writes `record` (and with `durable`, fsyncs it) before returning. */
  write(record: ProgressRecord, durable = false): void {
    const seq = this.seq + 1;
    const line = encodeProgressRecord(record, seq);
    if (this.fd === undefined || line.length > this.slotBytes) {
      this.create(line, seq, durable);
      return;
    }
    const slot = Buffer.alloc(this.slotBytes);
    line.copy(slot);
    writeSync(this.fd, slot, 0, slot.length, (seq % 2) * this.slotBytes);
    if (durable) fsyncSync(this.fd);
    this.seq = seq;
  }

  /** Closes the file; a later write creates it again. */
  close(): void {
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
  }

  private create(line: Buffer, seq: number, durable: boolean): void {
    this.close();
    this.slotBytes = Math.max(PROGRESS_SLOT_BYTES, 2 ** Math.ceil(Math.log2(line.length)));
    const file = Buffer.alloc(2 * this.slotBytes);
    line.copy(file, 0);
    line.copy(file, this.slotBytes);
    const path = join(this.dir, PROGRESS_RECORD_FILE);
    writeFileAtomicallySync(path, file, { durable });
    this.fd = openSync(path, 'r+');
    this.seq = seq;
  }
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
    return recordOfFile(bytes);
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
