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

/** Seconds between a pserver's checkpoints in the chaos job (by time only, not every step). */
export const CHAOS_CHECKPOINT_SECONDS = 2;

/** Plain SGD at this rate reaches 90% on the chaos data set after about four epochs (~3800 steps). */
export const CHAOS_LEARNING_RATE = 0.0004;

/**
 * A job on the chaos data set that learns slowly and steadily (plain SGD, small learning rate),
 * checkpoints every {@link CHAOS_CHECKPOINT_SECONDS} seconds (a restarted pserver resumes from the last one
 * and must keep its version), and evaluates often.
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
    checkpoint: { everySeconds: CHAOS_CHECKPOINT_SECONDS },
    evaluation: { everySteps: 20, metric: 'accuracy' },
    stop: { ...(options.target === undefined ? {} : { target: options.target }), maxSeconds: options.maxSeconds },
  });
}
