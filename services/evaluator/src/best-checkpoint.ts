/**
 * The evaluator's memory of a job on disk: the best parameters so far and the stop policy's
 * counters, kept in `<output>/best/` while the job runs, so an evaluator that is killed and
 * started again keeps judging the job where it left off and still exports its best model.
 *
 * `state.json` names the parameter file (`params-<version>.bin`, the tensors' bytes one after
 * the other) with its size and CRC-32. Each file is written through a temporary file and a
 * rename, the parameter file before the state that names it, and older parameter files are
 * removed only after that; so whatever instant the process dies, the directory holds a state
 * and the parameters it names.
 */
import { mkdir, readFile, readdir, rm } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { crc32, writeFileAtomically } from '#libs/file-integrity';
import type { PlainTensor, PlainTensorDtype } from '#libs/learner';
import type { PolicyState } from './stop-policy.js';

/** Directory of the checkpoint inside the job's output directory. */
export const BEST_DIR = 'best';
/** The checkpoint's state file. */
export const BEST_STATE_FILE = 'state.json';

/** What the checkpoint remembers of a job's run. */
export interface BestCheckpoint {
  jobId: string;
  /** The run (`JobRecord.startedAt`) it belongs to. */
  startedAt: string;
  metric: 'accuracy' | 'loss';
  /** The stop policy's counters, best included. */
  policy: PolicyState;
  /** Model version of the kept parameters (of `params`); -1 when none were kept. */
  version: number;
  /** The best parameters, when some were kept. */
  params?: PlainTensor[];
}

/** The checkpoint could not be read back (missing files, wrong size or checksum). */
export class BestCheckpointError extends Error {
  override readonly name = 'BestCheckpointError';

  constructor(
    readonly dir: string,
    reason: string,
    options?: ErrorOptions,
  ) {
    super(`best checkpoint in ${dir}: ${reason}`, options);
  }
}

interface StateFile {
  jobId: string;
  startedAt: string;
  metric: 'accuracy' | 'loss';
  policy: PolicyState;
  params?: {
    version: number;
    file: string;
    bytes: number;
    crc32: number;
    tensors: { name: string; dtype: PlainTensorDtype; shape: number[]; bytes: number }[];
  };
}

const ARRAYS = { float32: Float32Array, int32: Int32Array, bool: Uint8Array } as const;

/** The checkpoint directory of a job whose output is `output`. */
export function bestDir(output: string): string {
  return join(resolve(output), BEST_DIR);
}

/**
 * Writes the policy counters, and with `params` new best parameters (of model `version`), into
 * `<output>/best/`. Without `params` the parameter file named by the previous state is kept.
 */
export async function saveBestCheckpoint(output: string, checkpoint: BestCheckpoint): Promise<void> {
  const dir = bestDir(output);
  await mkdir(dir, { recursive: true });
  let paramsEntry: StateFile['params'];
  if (checkpoint.params !== undefined) {
    const parts = checkpoint.params.map((t) => new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength));
    const bytes = Buffer.concat(parts);
    const file = `params-${checkpoint.version}.bin`;
    await writeFileAtomically(join(dir, file), bytes);
    paramsEntry = {
      version: checkpoint.version,
      file,
      bytes: bytes.length,
      crc32: crc32(bytes),
      tensors: checkpoint.params.map((t, i) => ({
        name: t.name,
        dtype: t.dtype,
        shape: [...t.shape],
        bytes: parts[i]!.byteLength,
      })),
    };
  } else {
    paramsEntry = (await readState(dir).catch(() => undefined))?.params;
  }
  const state: StateFile = {
    jobId: checkpoint.jobId,
    startedAt: checkpoint.startedAt,
    metric: checkpoint.metric,
    policy: checkpoint.policy,
    ...(paramsEntry === undefined ? {} : { params: paramsEntry }),
  };
  await writeFileAtomically(join(dir, BEST_STATE_FILE), `${JSON.stringify(state)}\n`);
  for (const name of await readdir(dir)) {
    if (name.startsWith('params-') && name !== paramsEntry?.file) await rm(join(dir, name), { force: true });
  }
}

async function readState(dir: string): Promise<StateFile> {
  const text = await readFile(join(dir, BEST_STATE_FILE), 'utf8');
  const state = JSON.parse(text) as StateFile;
  if (state === null || typeof state !== 'object' || typeof state.jobId !== 'string') {
    throw new Error(`${BEST_STATE_FILE} is not a checkpoint state`);
  }
  return state;
}

/**
 * Reads the checkpoint of run `startedAt` of `jobId` from `<output>/best/`; undefined when there
 * is none, or it belongs to another run.
 * @throws BestCheckpointError when it is there but cannot be read whole.
 */
export async function loadBestCheckpoint(
  output: string,
  jobId: string,
  startedAt: string,
): Promise<BestCheckpoint | undefined> {
  const dir = bestDir(output);
  let state: StateFile;
  try {
    state = await readState(dir);
  } catch (cause) {
    if ((cause as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new BestCheckpointError(dir, (cause as Error).message, { cause });
  }
  if (state.jobId !== jobId || state.startedAt !== startedAt) return undefined;
  const checkpoint: BestCheckpoint = {
    jobId,
    startedAt,
    metric: state.metric,
    policy: state.policy,
    version: state.params?.version ?? -1,
  };
  if (state.params === undefined) return checkpoint;
  let bytes: Buffer;
  try {
    bytes = await readFile(join(dir, state.params.file));
  } catch (cause) {
    throw new BestCheckpointError(dir, `${state.params.file}: ${(cause as Error).message}`, { cause });
  }
  if (bytes.length !== state.params.bytes) {
    throw new BestCheckpointError(
      dir,
      `${state.params.file} has ${bytes.length} bytes, expected ${state.params.bytes}`,
    );
  }
  if (crc32(bytes) !== state.params.crc32) {
    throw new BestCheckpointError(dir, `${state.params.file} does not match its CRC-32`);
  }
  let offset = 0;
  checkpoint.params = state.params.tensors.map((t) => {
    const copy = new Uint8Array(t.bytes);
    copy.set(bytes.subarray(offset, offset + t.bytes));
    offset += t.bytes;
    const TypedArray = ARRAYS[t.dtype];
    return { name: t.name, dtype: t.dtype, shape: t.shape, data: new TypedArray(copy.buffer) };
  });
  return checkpoint;
}

/** Removes the checkpoint (once the final model is exported). */
export async function removeBestCheckpoint(output: string): Promise<void> {
  await rm(bestDir(output), { recursive: true, force: true });
}
