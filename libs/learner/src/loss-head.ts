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
  /** The mean of {@link perExampleLoss} over the batch, the loss a training step minimises. */
  meanLoss(outputs: tf.Tensor, labels: tf.Tensor1D): tf.Scalar;
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
    const squaredError = (outputs: tf.Tensor, labels: tf.Tensor1D): tf.Tensor1D =>
      tf.tidy(() => tf.squaredDifference(outputs.reshape([-1]), labels.toFloat()) as tf.Tensor1D);
    return {
      kind: 'regression',
      lossModel: model,
      perExampleLoss: squaredError,
      meanLoss: (outputs, labels) => tf.tidy(() => tf.mean(squaredError(outputs, labels)) as tf.Scalar),
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
      meanLoss: (outputs, labels) => meanCrossEntropyFromLogits(outputs, labels, numClasses),
      correctCount,
      dispose: () => {},
    };
  }
  if (hasFusedSoftmax(model)) {
    return {
      kind: 'probabilities',
      lossModel: model,
      perExampleLoss: (outputs, labels) => crossEntropyFromProbabilities(outputs, labels, numClasses),
      meanLoss: (outputs, labels) =>
        tf.tidy(() => tf.mean(crossEntropyFromProbabilities(outputs, labels, numClasses)) as tf.Scalar),
      correctCount,
      dispose: () => {},
    };
  }
  return {
    kind: 'logits',
    lossModel: model,
    perExampleLoss: (outputs, labels) => crossEntropyFromLogits(outputs, labels, numClasses),
    meanLoss: (outputs, labels) => meanCrossEntropyFromLogits(outputs, labels, numClasses),
    correctCount,
    dispose: () => {},
  };
}

/** Sparse categorical cross-entropy per example, from clipped probabilities. */
function crossEntropyFromProbabilities(probabilities: tf.Tensor, labels: tf.Tensor1D, numClasses: number): tf.Tensor1D {
  return tf.tidy(() => {
    const picked = tf.sum(tf.mul(probabilities, tf.oneHot(labels.toInt(), numClasses)), 1);
    return tf.neg(tf.log(tf.clipByValue(picked, MIN_PROBABILITY, 1))) as tf.Tensor1D;
  });
}

/** Sparse categorical cross-entropy per example, from logits, through a stable `logSoftmax`. */
export function crossEntropyFromLogits(logits: tf.Tensor, labels: tf.Tensor1D, numClasses: number): tf.Tensor1D {
  return tf.tidy(() => {
    const logProbabilities = tf.logSoftmax(logits as tf.Tensor2D);
    const picked = tf.sum(tf.mul(logProbabilities, tf.oneHot(labels.toInt(), numClasses)), 1);
    return tf.neg(picked) as tf.Tensor1D;
  });
}

/**
 * A logit's gradient smaller than this in magnitude, 2^-100, is taken as zero by the mean
 * cross-entropy op (see {@link crossEntropyWithGradient}). As a classifier learns, the softmax
 * of the classes it rules out falls far below float32's smallest normal (2^-126): on the example
 * MLP, after 40 s of training, 9 % of a minibatch's logit gradients were subnormal, and the
 * products of the backward pass made more of them. x86 computes on a subnormal float32 through
 * a microcode assist, many times slower than on a normal one; TensorFlow runs its CPU kernels
 * with flush-to-zero for this reason, a mode WebAssembly does not have. In two interleaved runs
 * each, going round 12,800 images, the learner alone slowed from 115,000-120,000 samples/s to
 * 108,000-112,000 over its first 40 s, and a learner started from the parameters it reached ran
 * at 104,000-110,000; with the flush, 111,000-122,000 and 111,000-121,000 (`npm run bench --
 * age`: 0.978 of a fresh learner's speed after 40 s, against 0.938 without). The bound leaves 26
 * binades above the smallest normal, so that the gradient's products with weights and
 * activations down to about 1e-8 stay normal. What it drops is a softmax share under 2^-100 of a
 * batch, whose effect on the loss is below float32's rounding of it.
 */
export const LOGIT_GRADIENT_FLUSH = 2 ** -100;

/** Backends that keep tensors in host memory, where reading a small one back costs a copy. */
export const HOST_MEMORY_BACKENDS: ReadonlySet<string> = new Set(['cpu', 'wasm']);

/**
 * The mean over the batch of {@link crossEntropyFromLogits}. On a backend that keeps tensors in
 * host memory (cpu, wasm) it is one operation with its own gradient, (softmax(logits) -
 * oneHot(labels)) / batch, computed in JavaScript: through TF.js the loss and its gradient take
 * about thirty small kernels (logSoftmax, oneHot, the product, the sums, the mean and their
 * gradients), whose bookkeeping costs far more than their arithmetic on a batch of 64 x 10
 * logits. Elsewhere (a GPU) it is the same expression in TF.js's kernels, which stays on the
 * device.
 */
export function meanCrossEntropyFromLogits(logits: tf.Tensor, labels: tf.Tensor1D, numClasses: number): tf.Scalar {
  if (!HOST_MEMORY_BACKENDS.has(tf.getBackend()) || logits.rank !== 2) {
    return tf.tidy(() => tf.mean(crossEntropyFromLogits(logits, labels, numClasses)) as tf.Scalar);
  }
  const classes = labels.dataSync();
  const loss = tf.customGrad((...args: (tf.Tensor | tf.GradSaveFunc)[]) => {
    const x = args[0] as tf.Tensor;
    const save = args[1] as tf.GradSaveFunc;
    const [rows, columns] = x.shape as [number, number];
    const { mean, gradient } = crossEntropyWithGradient(x.dataSync(), classes, rows, columns, numClasses);
    const perValue = tf.tensor2d(gradient, [rows, columns]);
    save([perValue]);
    return {
      value: tf.scalar(mean),
      gradFunc: (dy: tf.Tensor, saved: tf.Tensor[]) => tf.mul(dy, saved[0]!),
    };
  });
  return loss(logits) as tf.Scalar;
}

/**
 * The mean sparse categorical cross-entropy of `rows` x `columns` logits (row-major) against
 * class indices, and its gradient with respect to the logits, `(softmax(logits) -
 * oneHot(labels)) / rows`, computed in JavaScript (float64 sums). A gradient under
 * {@link LOGIT_GRADIENT_FLUSH} in magnitude is given as zero.
 * @throws Error when a row does not hold `numClasses` logits.
 */
export function crossEntropyWithGradient(
  values: ArrayLike<number>,
  classes: ArrayLike<number>,
  rows: number,
  columns: number,
  numClasses: number,
): { mean: number; gradient: Float32Array } {
  if (columns !== numClasses) {
    throw new Error(`the model gives ${columns} logits per example, the layout has ${numClasses} classes`);
  }
  const gradient = new Float32Array(rows * columns);
  /** One row's exp(logit - max), in float64 as the sums that use them. */
  const exps = new Float64Array(columns);
  let total = 0;
  for (let r = 0; r < rows; r++) {
    const row = r * columns;
    let max = -Infinity;
    for (let c = 0; c < columns; c++) max = Math.max(max, values[row + c]!);
    let sum = 0;
    for (let c = 0; c < columns; c++) {
      const e = Math.exp(values[row + c]! - max);
      exps[c] = e;
      sum += e;
    }
    const label = classes[r]!;
    total += Math.log(sum) + max - values[row + label]!;
    for (let c = 0; c < columns; c++) {
      const g = (exps[c]! / sum - (c === label ? 1 : 0)) / rows;
      gradient[row + c] = Math.abs(g) < LOGIT_GRADIENT_FLUSH ? 0 : g;
    }
  }
  return { mean: total / rows, gradient };
}
