/**
 * The held-out examples of a job: its `dataset.eval` RecordIO files, read once, decoded into
 * inference batches and kept for every evaluation of the job.
 */
import type { JobSpec } from '#libs/job-spec';
import { decodeBatch, type Batch } from '#libs/learner';
import { confineDataPaths, confinePath } from '#libs/config';
import { indexFiles, readChunk } from '#libs/recordio';
import { EvaluationSetError } from './errors.js';

/** The parts of a job spec that say what to evaluate on. */
export type EvaluationSetSpec = Pick<JobSpec, 'id' | 'dataset' | 'evaluation'>;

/** A job's decoded evaluation examples. */
export interface EvaluationSet {
  jobId: string;
  /** Batches of `evaluation.batchSize` examples (the last one may be smaller). */
  batches: Batch[];
  /** Examples in all batches. */
  examples: number;
  /** The files the examples came from, in reading order. */
  files: string[];
}

/** Options of {@link loadEvaluationSet}. */
export interface EvaluationSetOptions {
  /** Directory that relative patterns are resolved against; the process's by default. */
  cwd?: string;
  /** Where the files may be (`TRIBUTARY_DATA_ROOT`), links resolved; anywhere when unset. */
  dataRoots?: readonly string[];
}

/**
 * Reads the job's evaluation files in order (files sorted, chunks in file order) until
 * `evaluation.maxExamples` records (all of them without a limit), and decodes them with the
 * learner's record decoding into batches of `evaluation.batchSize`.
 * @throws EvaluationSetError naming the job, with the RecordIO or layout error as its cause,
 *   when a pattern matches no file, a chunk is corrupt, a record does not fit the layout, or
 *   there is no example at all.
 */
export async function loadEvaluationSet(
  spec: EvaluationSetSpec,
  options: EvaluationSetOptions = {},
): Promise<EvaluationSet> {
  const { batchSize } = spec.evaluation;
  const limit = spec.evaluation.maxExamples ?? Number.POSITIVE_INFINITY;
  let index;
  try {
    const roots = options.dataRoots;
    if (roots) await confineDataPaths('eval', spec.dataset.eval, roots, options.cwd);
    index = await indexFiles(spec.dataset.eval, options);
    if (roots) {
      for (const file of index.files) {
        await confinePath(file, roots, { field: 'dataset.eval', variable: 'TRIBUTARY_DATA_ROOT', cwd: options.cwd });
      }
    }
  } catch (cause) {
    throw new EvaluationSetError(spec.id, (cause as Error).message, { cause });
  }
  const batches: Batch[] = [];
  let pending: Uint8Array[] = [];
  let examples = 0;
  const flush = (): void => {
    if (pending.length === 0) return;
    try {
      batches.push(decodeBatch(pending, spec.dataset.layout));
    } catch (cause) {
      throw new EvaluationSetError(spec.id, `example ${examples - pending.length}: ${(cause as Error).message}`, {
        cause,
      });
    }
    pending = [];
  };
  for (const meta of index.chunks) {
    if (examples >= limit) break;
    let records: Uint8Array[];
    try {
      records = (await readChunk(meta.file, meta)).records;
    } catch (cause) {
      throw new EvaluationSetError(spec.id, (cause as Error).message, { cause });
    }
    for (const record of records) {
      if (examples >= limit) break;
      pending.push(record);
      examples += 1;
      if (pending.length === batchSize) flush();
    }
  }
  flush();
  if (examples === 0) {
    throw new EvaluationSetError(spec.id, `no examples in ${spec.dataset.eval.join(', ')}`);
  }
  return { jobId: spec.id, batches, examples, files: [...index.files] };
}

/**
 * Evaluation sets by job: each is loaded on first use and kept until {@link drop}. A failed
 * load is not kept, so a later call tries again (a file may have been fixed meanwhile).
 */
export class EvaluationSetCache {
  private readonly sets = new Map<string, Promise<EvaluationSet>>();

  constructor(private readonly options: EvaluationSetOptions = {}) {}

  /** The job's evaluation set, loading it the first time. */
  get(spec: EvaluationSetSpec): Promise<EvaluationSet> {
    let set = this.sets.get(spec.id);
    if (set === undefined) {
      set = loadEvaluationSet(spec, this.options);
      this.sets.set(spec.id, set);
      set.catch(() => {
        if (this.sets.get(spec.id) === set) this.sets.delete(spec.id);
      });
    }
    return set;
  }

  /** Forgets the job's evaluation set. */
  drop(jobId: string): void {
    this.sets.delete(jobId);
  }
}
