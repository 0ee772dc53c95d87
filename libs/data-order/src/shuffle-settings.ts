import { MissingSeedError } from './errors.js';

/** The data-order fields of a job's training spec. */
export interface DataOrderFields {
  /** Absent in specs stored before shuffling existed: those keep file order. */
  shuffle?: boolean;
  seed?: number;
  shuffleBuffer?: number;
}

/** How a job shuffles its data: the seed of every order, and the records a task's buffer holds. */
export interface ShuffleSettings {
  seed: number;
  /** Absent: as many records as the task's largest chunk. */
  bufferRecords?: number;
}

/**
 * The shuffle settings of a job, or undefined when its data keeps file order (`shuffle` false
 * or absent). The master and the trainers both read them from the spec, so they always agree.
 * @throws MissingSeedError when shuffling is on and the spec has no seed.
 */
export function shuffleSettings(jobId: string, training: DataOrderFields): ShuffleSettings | undefined {
  if (training.shuffle !== true) return undefined;
  if (training.seed === undefined) throw new MissingSeedError(jobId);
  return training.shuffleBuffer === undefined
    ? { seed: training.seed }
    : { seed: training.seed, bufferRecords: training.shuffleBuffer };
}
