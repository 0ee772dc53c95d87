import type { Batch, Learner, PlainTensor } from '#libs/learner';
import type { ClaimedTask } from '#libs/master-client';
import { MinibatchReader } from '../../services/trainer/src/minibatch-reader.js';

/*
 * What the training loop's unit tests hand it in place of a real task, reader and learner.
 */

/** A minibatch of one example with two features. */
export const ONE_EXAMPLE: Batch = { features: new Float32Array([1, 2]), labels: new Int32Array([0]), size: 1 };

/** A claimed task of job `j` over one chunk of `records` records (none: no chunks). */
export function claimedTask(records?: number): ClaimedTask {
  return {
    jobId: 'j',
    epoch: 0,
    taskId: 0,
    dispatchId: 'd',
    chunks: records === undefined ? [] : [{ file: 'f', offset: 0, numRecords: records }],
    deadlineMs: 0,
    leaseMs: 0,
  };
}

/** A reader whose every task is `count` minibatches, the i-th `batch(i)` (by default {@link ONE_EXAMPLE}). */
export function minibatchesOf(count: number, batch: (i: number) => Batch = () => ONE_EXAMPLE): MinibatchReader {
  const reader = new MinibatchReader({
    batchSize: 1,
    layout: { featureShape: [2], featureDtype: 'float32', scale: 1, labelDtype: 'int32' },
    readChunk: async () => ({ records: [] }),
  });
  reader.batches = async function* () {
    for (let i = 0; i < count; i++) yield batch(i);
  };
  return reader;
}

/**
 * A one-parameter learner `w`: `train` takes a step of -1 (the gradient is 1) and `getUpdate`
 * gives the delta since the last `setParams` or `getUpdate`. Each call is written to `calls`
 * (`set x`, `train`, `update`), which may be shared with fakes of the parameter servers.
 */
export class ScalarLearner implements Learner {
  x = 0;
  private start = 0;

  constructor(readonly calls: string[] = []) {}

  async initialize(): Promise<void> {}
  async getParams(): Promise<PlainTensor[]> {
    return [{ name: 'w', dtype: 'float32', shape: [1], data: Float32Array.of(this.x) }];
  }
  setParams(params: PlainTensor[]): void {
    this.x = params[0]!.data[0]!;
    this.start = this.x;
    this.calls.push(`set ${this.x}`);
  }
  async train(): Promise<{ loss: number; samples: number }> {
    this.x -= 1;
    this.calls.push('train');
    return { loss: 0, samples: 1 };
  }
  async getUpdate(): Promise<PlainTensor[]> {
    this.calls.push('update');
    const delta = this.x - this.start;
    this.start = this.x;
    return [{ name: 'w', dtype: 'float32', shape: [1], data: Float32Array.of(delta) }];
  }
  async evaluate() {
    return { lossSum: 0, correct: 0, samples: 0 };
  }
  shutdown(): void {}
}
