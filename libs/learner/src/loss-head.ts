import * as tf from '@tensorflow/tfjs';
import type { RecordLayout } from './model-spec.js';

/** Smallest probability fed to `log` when a model only exposes probabilities. */
export const MIN_PROBABILITY = 1e-7;

/**
 * What the loss reads from the model: `logits` (a softmax follows, or the model ends without
 * one), `probabilities` (a layer with a built-in softmax ends the model), or a `regression`
 * prediction.
 */
export type OutputKind = 'logits' | 'probabilities' | 'regression';

/**
 * The loss side of a model. For classification the loss is sparse categorical cross-entropy,
 * computed from logits through `logSoftmax` when the model's last layer is a separate softmax
 * (the presets), from clipped probabilities when the softmax is fused into the last layer, and
 * from the raw output when there is no softmax at all. Regression uses the squared error.
 */
export interface LossHead {
  kind: OutputKind;
  /** Model from the input to what the loss reads; shares its weights with the full model. */
  lossModel: tf.LayersModel;
  /** Per-example loss, shape `[batch]`. */
  perExampleLoss(outputs: tf.Tensor, labels: tf.Tensor1D): tf.Tensor1D;
  /** Number of examples whose arg-max output equals the label (always 0 for regression). */
  correctCount(outputs: tf.Tensor, labels: tf.Tensor1D): tf.Scalar;
  /** Releases what the head created (not the full model's weights). */
  dispose(): void;
}

function endsWithSoftmaxLayer(model: tf.LayersModel): tf.layers.Layer | undefined {
  const last = model.layers[model.layers.length - 1];
  if (last === undefined || last.getClassName() !== 'Activation') return undefined;
  return last.getConfig()['activation'] === 'softmax' ? last : undefined;
}

function hasFusedSoftmax(model: tf.LayersModel): boolean {
  const last = model.layers[model.layers.length - 1];
  return last !== undefined && last.getClassName() !== 'Activation' && last.getConfig()['activation'] === 'softmax';
}

/** Chooses how the loss reads `model` for the given layout; see {@link LossHead}. */
export function createLossHead(model: tf.LayersModel, layout: RecordLayout): LossHead {
  const numClasses = layout.numClasses;
  if (numClasses === undefined) {
    return {
      kind: 'regression',
      lossModel: model,
      perExampleLoss: (outputs, labels) =>
        tf.tidy(() => tf.squaredDifference(outputs.reshape([-1]), labels.toFloat()) as tf.Tensor1D),
      correctCount: () => tf.scalar(0),
      dispose: () => {},
    };
  }
  const correctCount = (outputs: tf.Tensor, labels: tf.Tensor1D): tf.Scalar =>
    tf.tidy(() => tf.equal(tf.argMax(outputs, 1), labels.toInt()).toInt().sum() as tf.Scalar);
  const softmax = endsWithSoftmaxLayer(model);
  if (softmax !== undefined) {
    const logitsOutput = softmax.input as tf.SymbolicTensor;
    const lossModel = tf.model({ inputs: model.inputs, outputs: logitsOutput });
    return {
      kind: 'logits',
      lossModel,
      perExampleLoss: (outputs, labels) => crossEntropyFromLogits(outputs, labels, numClasses),
      correctCount,
      dispose: () => {},
    };
  }
  if (hasFusedSoftmax(model)) {
    return {
      kind: 'probabilities',
      lossModel: model,
      perExampleLoss: (outputs, labels) =>
        tf.tidy(() => {
          const picked = tf.sum(tf.mul(outputs, tf.oneHot(labels.toInt(), numClasses)), 1);
          return tf.neg(tf.log(tf.clipByValue(picked, MIN_PROBABILITY, 1))) as tf.Tensor1D;
        }),
      correctCount,
      dispose: () => {},
    };
  }
  return {
    kind: 'logits',
    lossModel: model,
    perExampleLoss: (outputs, labels) => crossEntropyFromLogits(outputs, labels, numClasses),
    correctCount,
    dispose: () => {},
  };
}

/** Sparse categorical cross-entropy per example, from logits, through a stable `logSoftmax`. */
export function crossEntropyFromLogits(logits: tf.Tensor, labels: tf.Tensor1D, numClasses: number): tf.Tensor1D {
  return tf.tidy(() => {
    const logProbabilities = tf.logSoftmax(logits as tf.Tensor2D);
    const picked = tf.sum(tf.mul(logProbabilities, tf.oneHot(labels.toInt(), numClasses)), 1);
    return tf.neg(picked) as tf.Tensor1D;
  });
}
