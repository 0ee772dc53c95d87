import * as tf from '@tensorflow/tfjs';
import fc from 'fast-check';
import {
  LOGIT_GRADIENT_FLUSH,
  createLossHead,
  crossEntropyFromLogits,
  crossEntropyWithGradient,
  meanCrossEntropyFromLogits,
} from './loss-head.js';
import type { RecordLayout } from './model-spec.js';
import { buildModel } from './models.js';

const LAYOUT: RecordLayout = {
  featureShape: [4],
  featureDtype: 'float32',
  scale: 1,
  labelDtype: 'int32',
  numClasses: 3,
};

function denseModel(activation: 'softmax' | 'linear', separateSoftmax: boolean): tf.Sequential {
  const layers: tf.layers.Layer[] = [
    tf.layers.dense({
      inputShape: [4],
      units: 3,
      activation,
      kernelInitializer: tf.initializers.glorotUniform({ seed: 5 }),
    }),
  ];
  if (separateSoftmax) layers.push(tf.layers.activation({ activation: 'softmax' }));
  return tf.sequential({ layers });
}

/** Uniform numbers in [0, 1) from `seed`, the same for the same seed. */
function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (Math.imul(state ^ (state >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) >>> 0;
    return state / 2 ** 32;
  };
}

describe('loss head', () => {
  beforeAll(async () => {
    await tf.setBackend('cpu');
  });

  it('loss head - each way of ending a classifier gives the same cross-entropy', () => {
    const separate = denseModel('linear', true);
    const fused = denseModel('softmax', false);
    const logitsOnly = denseModel('linear', false);
    const heads = [separate, fused, logitsOnly].map((m) => createLossHead(m, LAYOUT));
    expect(heads.map((h) => h.kind)).toEqual(['logits', 'probabilities', 'logits']);
    expect(heads[0]!.lossModel.outputs[0]!.shape).toEqual([null, 3]);
    const x = tf.tensor2d([0.1, -0.4, 0.9, 0.3, -1, 0.5, 0.2, 0.7], [2, 4]);
    const y = tf.tensor1d([2, 0], 'int32');
    const losses = heads.map((h) => Array.from(h.perExampleLoss(h.lossModel.predict(x) as tf.Tensor, y).dataSync()));
    expect(losses[1]![0]).toBeCloseTo(losses[0]![0]!, 5);
    expect(losses[2]).toEqual(losses[0]);
    const probabilities = separate.predict(x) as tf.Tensor2D;
    const expected = [-Math.log(probabilities.arraySync()[0]![2]!), -Math.log(probabilities.arraySync()[1]![0]!)];
    expect(losses[0]![0]).toBeCloseTo(expected[0]!, 5);
    expect(losses[0]![1]).toBeCloseTo(expected[1]!, 5);
    tf.dispose([x, y, probabilities]);
    [separate, fused, logitsOnly].forEach((m) => m.dispose());
  });

  it('loss head - presets read logits before the softmax', async () => {
    const model = await buildModel({
      model: { preset: 'mlp', hiddenUnits: [5], activation: 'relu', dropout: 0 },
      layout: LAYOUT,
    });
    const head = createLossHead(model, LAYOUT);
    expect(head.kind).toBe('logits');
    expect(head.lossModel.outputs[0]!.sourceLayer.name).toBe('output');
    model.dispose();
  });

  it('loss head - regression reads the prediction and counts nothing as correct', async () => {
    const layout: RecordLayout = { ...LAYOUT, labelDtype: 'float32', numClasses: undefined };
    delete layout.numClasses;
    const model = await buildModel({
      model: { preset: 'mlp', hiddenUnits: [], activation: 'relu', dropout: 0 },
      layout,
    });
    const head = createLossHead(model, layout);
    expect(head.kind).toBe('regression');
    const loss = head.perExampleLoss(tf.tensor2d([1, 2], [2, 1]), tf.tensor1d([0.5, 4]));
    expect(Array.from(loss.dataSync())).toEqual([0.25, 4]);
    expect(head.correctCount(tf.tensor2d([1, 2], [2, 1]), tf.tensor1d([1, 2])).dataSync()[0]).toBe(0);
    model.dispose();
  });

  it('loss head - the mean cross-entropy op gives the value and gradient of the expression it replaces', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 9 }),
        fc.integer({ min: 2, max: 12 }),
        fc.constantFrom(1, 10, 80),
        fc.integer(),
        fc.double({ min: 0.25, max: 4, noNaN: true }),
        (rows, classes, spread, seed, outerScale) => {
          const next = seededRandom(seed);
          const values = Array.from({ length: rows * classes }, () => (next() * 2 - 1) * spread);
          const classOf = Array.from({ length: rows }, () => Math.floor(next() * classes));
          const before = tf.memory().numTensors;
          const run = (fused: boolean): { value: number; gradient: number[] } => {
            const initial = tf.tensor2d(values, [rows, classes]);
            const logits = tf.variable(initial, true, `logits-${String(fused)}`);
            const labels = tf.tensor1d(classOf, 'int32');
            const { value, grads } = tf.variableGrads(
              () =>
                tf.mul(
                  fused
                    ? meanCrossEntropyFromLogits(logits, labels, classes)
                    : tf.mean(crossEntropyFromLogits(logits, labels, classes)),
                  outerScale,
                ) as tf.Scalar,
              [logits],
            );
            const out = { value: value.dataSync()[0]!, gradient: Array.from(grads[logits.name]!.dataSync()) };
            tf.dispose([initial, logits, labels, value, ...Object.values(grads)]);
            return out;
          };
          const ours = run(true);
          const theirs = run(false);
          expect(tf.memory().numTensors).toBe(before);
          expect(ours.value).toBeCloseTo(theirs.value, 4);
          ours.gradient.forEach((g, i) => expect(g).toBeCloseTo(theirs.gradient[i]!, 5));
        },
      ),
      { numRuns: 60 },
    );
  });

  it('loss head - the mean cross-entropy op gives a logit gradient under the flush bound as zero, and none subnormal', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 8 }),
        fc.integer({ min: 2, max: 10 }),
        fc.integer(),
        (rows, classes, seed) => {
          const next = seededRandom(seed);
          // Logits as a confident classifier's: gaps of up to 120, whose softmax shares reach
          // far below float32's smallest normal, 2^-126 (about e^-87).
          const values = Array.from({ length: rows * classes }, () => next() * 120);
          const classOf = Array.from({ length: rows }, () => Math.floor(next() * classes));
          const { gradient } = crossEntropyWithGradient(values, classOf, rows, classes, classes);
          for (let r = 0; r < rows; r++) {
            const row = values.slice(r * classes, (r + 1) * classes);
            const max = Math.max(...row);
            const sum = row.reduce((a, v) => a + Math.exp(v - max), 0);
            row.forEach((v, c) => {
              const exact = (Math.exp(v - max) / sum - (c === classOf[r] ? 1 : 0)) / rows;
              const ours = gradient[r * classes + c]!;
              if (Math.abs(exact) < LOGIT_GRADIENT_FLUSH) expect(ours).toBe(0);
              else expect(ours).toBe(Math.fround(exact));
              // None subnormal: zero, or at least float32's smallest normal.
              expect(ours === 0 || Math.abs(ours) >= 2 ** -126).toBe(true);
            });
          }
        },
      ),
      { numRuns: 200 },
    );
  });

  it('loss head - the mean cross-entropy op refuses logits that do not match the classes', () => {
    const logits = tf.tensor2d([1, 2, 3, 4], [2, 2]);
    const labels = tf.tensor1d([0, 1], 'int32');
    expect(() => meanCrossEntropyFromLogits(logits, labels, 3)).toThrow(/2 logits per example.*3 classes/);
    tf.dispose([logits, labels]);
  });
});
