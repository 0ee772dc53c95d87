/**
 * Writing a job's result into its output directory: the model as a TF.js LayersModel
 * (`model.json` + `weights.bin`) and `summary.json`, each file put in place by a rename so a
 * reader never sees half a file. `summary.json` is written last: its presence, naming the job,
 * means the export is complete.
 */
import type * as tf from '@tensorflow/tfjs';
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, rename, rm } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { writeFileAtomically } from '#libs/file-integrity';
import { MODEL_JSON_FILE, WEIGHTS_FILE, saveLayersModel } from '#libs/learner';
import type { JobSummary } from '#libs/messaging';
import { ModelExportError } from './errors.js';

/** File name of the job summary in the output directory. */
export const SUMMARY_FILE = 'summary.json';

function scratchName(): string {
  return `.export-${process.pid}-${randomBytes(4).toString('hex')}`;
}

/**
 * Saves `model` into `output` (created if missing): the learner library writes it into a
 * scratch directory inside `output`, then the weights and `model.json` are renamed into place.
 * @throws ModelExportError naming the job and the directory.
 */
export async function exportModel(jobId: string, model: tf.LayersModel, output: string): Promise<void> {
  const dir = resolve(output);
  const scratch = join(dir, scratchName());
  try {
    await mkdir(dir, { recursive: true });
    await saveLayersModel(model, scratch);
    await rename(join(scratch, WEIGHTS_FILE), join(dir, WEIGHTS_FILE));
    await rename(join(scratch, MODEL_JSON_FILE), join(dir, MODEL_JSON_FILE));
  } catch (cause) {
    throw new ModelExportError(jobId, dir, (cause as Error).message, { cause });
  } finally {
    await rm(scratch, { recursive: true, force: true }).catch(() => undefined);
  }
}

/**
 * Writes `summary.json` into `output`.
 * @throws ModelExportError naming the job and the directory.
 */
export async function writeSummary(output: string, summary: JobSummary): Promise<void> {
  const dir = resolve(output);
  try {
    await mkdir(dir, { recursive: true });
    await writeFileAtomically(join(dir, SUMMARY_FILE), `${JSON.stringify(summary, null, 2)}\n`);
  } catch (cause) {
    throw new ModelExportError(summary.jobId, dir, (cause as Error).message, { cause });
  }
}

/**
 * The summary of `jobId` in `output` when the job was exported there (started at
 * `startedAt`, when given), or undefined — so a restarted evaluator knows what is left to do.
 */
export async function readExportedSummary(
  output: string,
  jobId: string,
  startedAt?: string,
): Promise<JobSummary | undefined> {
  let text: string;
  try {
    text = await readFile(join(resolve(output), SUMMARY_FILE), 'utf8');
  } catch {
    return undefined;
  }
  try {
    const summary = JSON.parse(text) as JobSummary;
    if (summary === null || typeof summary !== 'object' || summary.jobId !== jobId) return undefined;
    return startedAt === undefined || summary.startedAt === startedAt ? summary : undefined;
  } catch {
    return undefined;
  }
}
