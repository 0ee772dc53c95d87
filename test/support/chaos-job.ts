import { tinyJobSpec, writeTinyDataset, type TinyDataset } from './tiny-dataset.js';

/**
 * Shape of the chaos job's data: enough chunks that an epoch lasts a while and the tasks a kill
 * interrupts are a small part of it.
 */
export const CHAOS_DATASET = { files: 8, chunksPerFile: 64, recordsPerChunk: 64, evalRecords: 512 } as const;

/** Writes the chaos job's data set (the tiny 4-class set, larger) under `dir`. */
export function writeChaosDataset(dir: string): Promise<TinyDataset> {
  return writeTinyDataset(dir, CHAOS_DATASET);
}

/** What the chaos job's spec may change. */
export interface ChaosJobOptions {
  /** Accuracy that stops the job (reason `target`). */
  target?: number;
  /** Wall-clock budget; reaching it stops the job with reason `maxSeconds`. */
  maxSeconds: number;
  /** Plain SGD learning rate: small, so the target takes several epochs. */
  learningRate?: number;
}

/** Plain SGD at this rate reaches 90% on the chaos data set after about six epochs (6000 steps). */
export const CHAOS_LEARNING_RATE = 0.00025;

/**
 * A job on the chaos data set that learns slowly and steadily (plain SGD, small learning rate),
 * checkpoints every step (a restarted pserver resumes where it was), and evaluates often.
 */
export function chaosJobSpec(id: string, data: TinyDataset, output: string, options: ChaosJobOptions) {
  return tinyJobSpec(id, data, output, {
    optimizer: { type: 'sgd', learningRate: options.learningRate ?? CHAOS_LEARNING_RATE },
    training: {
      mode: 'sync',
      batchSize: 16,
      chunksPerTask: 1,
      maxTaskFailures: 5,
      taskTimeout: { floorMs: 5000, multiplier: 3 },
      seed: 1,
    },
    checkpoint: { everySteps: 1, everySeconds: 5 },
    evaluation: { everySteps: 20, metric: 'accuracy' },
    stop: { ...(options.target === undefined ? {} : { target: options.target }), maxSeconds: options.maxSeconds },
  });
}
