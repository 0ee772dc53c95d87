import { mkdir, readFile, readdir, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { crc32, writeFileAtomically } from '#libs/file-integrity';
import { CheckpointError } from './errors.js';

/**
 * A shard's checkpoint of one job: a data file holding the parameters, the optimizer state and
 * the version, and a metadata file naming the latest data files with their CRC-32 and length.
 *
 * Data file (`ckpt-<version>.bin`): the magic `TRBCKPT1`, a uint32 LE header length, the header
 * as UTF-8 JSON (padded with spaces to a multiple of 4 bytes), the float32 LE payload (per
 * tensor: its values, then each optimizer state slot), and a uint32 LE CRC-32 of everything
 * before it, so a data file can be checked even without its metadata.
 *
 * Writing is crash-safe, in this order: the data file is written to a temporary name, fsynced,
 * renamed to its own name and the directory fsynced; then the metadata, which records the new
 * file with its CRC-32 and length, is written the same way; only then are data files beyond
 * `keep` deleted. A crash at any point leaves the metadata naming intact files. Loading checks
 * length and CRC and falls back to the previous checkpoint when the latest is damaged, with a
 * log line naming the damaged file and the one used instead.
 *
 * A checkpoint holds the parameters of one version; the version a restarted shard resumes at
 * comes from its progress record (see `shard-recovery.ts` and `progress-record.ts`).
 */

/** Name of the metadata file in a checkpoint directory. */
export const CHECKPOINT_METADATA_FILE = 'checkpoint.json';
/** Checkpoints kept when the caller gives no number. */
export const CHECKPOINTS_KEPT = 2;

const MAGIC = Buffer.from('TRBCKPT1', 'latin1');
const FORMAT = 1;
const DATA_FILE_PATTERN = /^ckpt-(\d+)\.bin$/;
/** Temporaries of data and metadata files a crash may leave behind (not other files' temporaries). */
const TEMPORARY_PATTERN = /^(ckpt-\d+\.bin|checkpoint\.json)\.tmp-/;

/** One parameter in a checkpoint: its values and its optimizer state slots. */
export interface CheckpointTensor {
  name: string;
  shape: number[];
  value: Float32Array;
  state: Float32Array[];
}

/** Everything a shard needs to resume a job. */
export interface CheckpointData {
  jobId: string;
  shard: number;
  version: number;
  /** The job spec as the shard received it. */
  specJson: string;
  /** Optimizer kernel name the state slots belong to. */
  optimizer: string;
  tensors: CheckpointTensor[];
}

/** A data file as recorded in the metadata. */
export interface CheckpointRecord {
  version: number;
  file: string;
  crc32: number;
  bytes: number;
  savedAt: string;
}

/** The metadata file: the latest checkpoint's record, and older kept ones (newest first). */
interface CheckpointMetadata extends CheckpointRecord {
  format: number;
  previous: CheckpointRecord[];
}

interface Header {
  format: number;
  jobId: string;
  shard: number;
  version: number;
  specJson: string;
  optimizer: string;
  tensors: { name: string; shape: number[]; elements: number; slots: number }[];
}

/** The data file name of a version. */
export function checkpointFileName(version: number): string {
  return `ckpt-${String(version).padStart(12, '0')}.bin`;
}

/** Serialises a checkpoint into the data file format. */
export function encodeCheckpoint(data: CheckpointData): Buffer {
  const header: Header = {
    format: FORMAT,
    jobId: data.jobId,
    shard: data.shard,
    version: data.version,
    specJson: data.specJson,
    optimizer: data.optimizer,
    tensors: data.tensors.map((t) => ({
      name: t.name,
      shape: t.shape,
      elements: t.value.length,
      slots: t.state.length,
    })),
  };
  let headerBytes = Buffer.from(JSON.stringify(header), 'utf8');
  const pad = (4 - ((MAGIC.length + 4 + headerBytes.length) % 4)) % 4;
  headerBytes = Buffer.concat([headerBytes, Buffer.alloc(pad, 0x20)]);
  const payloadBytes = data.tensors.reduce((n, t) => n + 4 * t.value.length * (1 + t.state.length), 0);
  const out = Buffer.alloc(MAGIC.length + 4 + headerBytes.length + payloadBytes + 4);
  let at = MAGIC.copy(out, 0);
  at = out.writeUInt32LE(headerBytes.length, at);
  at += headerBytes.copy(out, at);
  for (const t of data.tensors) {
    for (const arr of [t.value, ...t.state]) {
      if (arr.length !== t.value.length) {
        throw new CheckpointError(
          data.jobId,
          `state of "${t.name}" has ${arr.length} elements, expected ${t.value.length}`,
        );
      }
      at += Buffer.from(arr.buffer, arr.byteOffset, arr.byteLength).copy(out, at);
    }
  }
  out.writeUInt32LE(crc32(out.subarray(0, at)), at);
  return out;
}

/** Parses and verifies a data file; `source` names it in errors. */
export function decodeCheckpoint(bytes: Uint8Array, source: string): CheckpointData {
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const minimum = MAGIC.length + 8;
  if (buf.length < minimum) throw new CheckpointError(source, `truncated: ${buf.length} bytes`);
  if (!buf.subarray(0, MAGIC.length).equals(MAGIC)) throw new CheckpointError(source, 'bad magic number at byte 0');
  const stored = buf.readUInt32LE(buf.length - 4);
  const actual = crc32(buf.subarray(0, buf.length - 4));
  if (stored !== actual) {
    throw new CheckpointError(source, `CRC-32 mismatch: stored ${hex(stored)}, computed ${hex(actual)}`);
  }
  const headerLength = buf.readUInt32LE(MAGIC.length);
  const payloadStart = MAGIC.length + 4 + headerLength;
  if (payloadStart > buf.length - 4)
    throw new CheckpointError(source, `header of ${headerLength} bytes overruns the file`);
  let header: Header;
  try {
    header = JSON.parse(buf.subarray(MAGIC.length + 4, payloadStart).toString('utf8')) as Header;
  } catch (cause) {
    throw new CheckpointError(source, 'header is not JSON', { cause });
  }
  if (header.format !== FORMAT) throw new CheckpointError(source, `unknown format ${header.format}`);
  let at = payloadStart;
  const take = (n: number): Float32Array => {
    if (at + 4 * n > buf.length - 4) throw new CheckpointError(source, `payload truncated at byte ${at}`);
    const arr = new Float32Array(n);
    Buffer.from(arr.buffer).set(buf.subarray(at, at + 4 * n));
    at += 4 * n;
    return arr;
  };
  const tensors = header.tensors.map((t) => ({
    name: t.name,
    shape: t.shape,
    value: take(t.elements),
    state: Array.from({ length: t.slots }, () => take(t.elements)),
  }));
  if (at !== buf.length - 4)
    throw new CheckpointError(source, `${buf.length - 4 - at} unexpected bytes after the payload`);
  return {
    jobId: header.jobId,
    shard: header.shard,
    version: header.version,
    specJson: header.specJson,
    optimizer: header.optimizer,
    tensors,
  };
}

async function readMetadata(dir: string): Promise<CheckpointMetadata | undefined> {
  let text: string;
  try {
    text = await readFile(join(dir, CHECKPOINT_METADATA_FILE), 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  const meta = JSON.parse(text) as CheckpointMetadata;
  if (typeof meta.file !== 'string' || typeof meta.crc32 !== 'number' || !Array.isArray(meta.previous)) {
    throw new Error('fields missing');
  }
  return meta;
}

/**
 * Writes a checkpoint into `dir` (created if missing) and keeps the newest `keep` data files.
 * Returns the new record.
 */
export async function writeCheckpoint(
  dir: string,
  data: CheckpointData,
  keep = CHECKPOINTS_KEPT,
): Promise<CheckpointRecord> {
  await mkdir(dir, { recursive: true });
  const bytes = encodeCheckpoint(data);
  const file = checkpointFileName(data.version);
  await writeFileAtomically(join(dir, file), bytes, { durable: true });
  const record: CheckpointRecord = {
    version: data.version,
    file,
    crc32: crc32(bytes),
    bytes: bytes.length,
    savedAt: new Date().toISOString(),
  };
  let older: CheckpointRecord[];
  try {
    const before = await readMetadata(dir);
    older = before ? [strip(before), ...before.previous] : [];
  } catch {
    // Unreadable metadata: the data files on disk, newest first, stay the fallbacks (loading
    // checks each one's own CRC).
    older = dataFilesNewestFirst(await readdir(dir)).map(({ file: f }) => ({
      version: Number(DATA_FILE_PATTERN.exec(f)![1]),
      file: f,
      crc32: -1,
      bytes: -1,
      savedAt: '',
    }));
  }
  const previous = older.filter((r) => r.file !== file).slice(0, Math.max(1, keep) - 1);
  const meta: CheckpointMetadata = { format: FORMAT, ...record, previous };
  await writeFileAtomically(join(dir, CHECKPOINT_METADATA_FILE), Buffer.from(`${JSON.stringify(meta, null, 2)}\n`), {
    durable: true,
  });
  // Only now that the metadata names the new file may older ones go.
  const kept = new Set([file, ...previous.map((r) => r.file)]);
  for (const name of await readdir(dir)) {
    const stale = (DATA_FILE_PATTERN.test(name) && !kept.has(name)) || TEMPORARY_PATTERN.test(name);
    if (stale) await unlink(join(dir, name)).catch(() => undefined);
  }
  return record;
}

function strip(meta: CheckpointMetadata): CheckpointRecord {
  const { version, file, crc32: crc, bytes, savedAt } = meta;
  return { version, file, crc32: crc, bytes, savedAt };
}

/**
 * Loads the newest intact checkpoint in `dir`: the metadata's latest, else its older records,
 * else (when the metadata itself is missing or unreadable) any data file whose own CRC holds,
 * newest first. Each fallback is logged with the reason. Resolves undefined when `dir` holds no
 * checkpoint; rejects with `CheckpointError` when it holds only damaged ones.
 */
export async function loadCheckpoint(
  dir: string,
  log: (line: string) => void = () => undefined,
): Promise<{ data: CheckpointData; file: string } | undefined> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  let candidates: { file: string; crc32?: number; bytes?: number }[];
  try {
    const meta = await readMetadata(dir);
    candidates = meta ? [meta, ...meta.previous] : [];
    if (!meta && names.some((n) => DATA_FILE_PATTERN.test(n))) {
      log(`checkpoint ${dir}: no ${CHECKPOINT_METADATA_FILE}; trying data files newest first`);
      candidates = dataFilesNewestFirst(names);
    }
  } catch (err) {
    log(
      `checkpoint ${dir}: ${CHECKPOINT_METADATA_FILE} unreadable (${(err as Error).message}); trying data files newest first`,
    );
    candidates = dataFilesNewestFirst(names);
  }
  if (candidates.length === 0) return undefined;
  const failures: string[] = [];
  for (const [i, c] of candidates.entries()) {
    const path = join(dir, c.file);
    try {
      const bytes = await readFile(path);
      // A record with a negative length and CRC was rebuilt from the directory: the file's own CRC decides.
      if (c.bytes !== undefined && c.bytes >= 0 && bytes.length !== c.bytes) {
        throw new CheckpointError(path, `truncated or extended: ${bytes.length} bytes, metadata says ${c.bytes}`);
      }
      if (c.crc32 !== undefined && c.crc32 >= 0 && crc32(bytes) !== c.crc32) {
        throw new CheckpointError(
          path,
          `CRC-32 mismatch: computed ${hex(crc32(bytes))}, metadata says ${hex(c.crc32)}`,
        );
      }
      const data = decodeCheckpoint(bytes, path);
      if (i > 0) log(`checkpoint ${dir}: loaded older checkpoint ${c.file} (version ${data.version})`);
      return { data, file: path };
    } catch (err) {
      const reason = (err as Error).message;
      failures.push(reason);
      const next = candidates[i + 1];
      log(`${reason}; ${next ? `falling back to ${next.file}` : 'no older checkpoint to fall back to'}`);
    }
  }
  throw new CheckpointError(dir, `no intact checkpoint: ${failures.join('; ')}`);
}

function dataFilesNewestFirst(names: readonly string[]): { file: string }[] {
  return names
    .flatMap((n) => {
      const m = DATA_FILE_PATTERN.exec(n);
      return m ? [{ file: n, version: Number(m[1]) }] : [];
    })
    .sort((a, b) => b.version - a.version)
    .map(({ file }) => ({ file }));
}

function hex(n: number): string {
  return `0x${n.toString(16).padStart(8, '0')}`;
}
