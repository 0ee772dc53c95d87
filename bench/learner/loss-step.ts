/**
 * `loss`: samples/s of the learner step of the MLP and the CNN on the wasm backend with the
 * training loss (the batch's mean cross-entropy from logits) as one operation computed on the
 * host with its own gradient, against the same step with the loss as the TF.js expression it
 * replaced (logSoftmax, oneHot, product, sums and mean, about thirty small kernels with their
 * gradients). Both are measured in this run, in paired rounds (see `paired-rounds`).
 */
import * as tf from '@tensorflow/tfjs';
import { selectBackend, type LossHead, type TfjsLearner } from '#libs/learner';
import type { BenchResult } from '../bench-result.js';
import { comparePairedRounds } from './paired-rounds.js';

/** Target: the one operation is no slower than the expression. */
const TARGET_RATIO = 1;

/** The learner's loss head; the bench swaps its mean loss for the baseline. */
function lossHeadOf(learner: TfjsLearner): LossHead {
  const head = (learner as unknown as { built?: { head: LossHead } }).built?.head;
  if (head?.kind !== 'logits') throw new Error('the workload has no loss head on logits');
  return head;
}

export async function runLossStepBench(say: (line: string) => void): Promise<BenchResult[]> {
  await selectBackend('wasm');
  return comparePairedRounds(
    {
      ours: { label: 'one op', prepare: (learner) => void lossHeadOf(learner) },
      baseline: {
        label: 'kernels',
        prepare: (learner) => {
          const head = lossHeadOf(learner);
          head.meanLoss = (outputs, labels) =>
            tf.tidy(() => tf.mean(head.perExampleLoss(outputs, labels)) as tf.Scalar);
        },
      },
      resultName: (label) => `loss: ${label} on wasm, mean cross-entropy as one host op vs TF.js kernels`,
      target: TARGET_RATIO,
    },
    say,
  );
}
