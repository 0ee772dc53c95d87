/**
 * The single-process baseline of `tta`: a plain TensorFlow.js training loop on one core, as a
 * user would write it without Tributary. The example job's MLP (784-128-10, relu, softmax),
 * Adam 0.001, batch 64, the training records in file order epoch after epoch, and every 100
 * steps the 10,000 test images scored in batches of 1,000; it stops at the first score of 0.85.
 */
import * as tf from '@tensorflow/tfjs';
import { decodeBatch, selectBackend } from '#libs/learner';
import { EXAMPLE_LAYOUT, readRecords } from '../cluster/bench-cluster.js';

const BATCH_SIZE = 64;
const EVALUATE_EVERY_STEPS = 100;
/** Examples trained on between two evaluations. */
export const EVALUATE_EVERY_EXAMPLES = EVALUATE_EVERY_STEPS * BATCH_SIZE;
const EVALUATION_BATCH_SIZE = 1_000;
/** Epochs after which the loop gives up. */
const MAX_EPOCHS = 10;

async function loadExamples(pattern: string): Promise<{ x: Float32Array; y: Int32Array; size: number }> {
  const batch = decodeBatch(await readRecords(pattern), EXAMPLE_LAYOUT);
  return { x: batch.features, y: batch.labels as Int32Array, size: batch.size };
}

/** Seconds from the first training step to a test accuracy of `target`, and the steps it took. */
export async function singleProcessTimeToTarget(
  dataDir: string,
  target: number,
  say: (line: string) => void,
): Promise<{ seconds: number; steps: number; accuracy: number }> {
  await selectBackend('wasm');
  const train = await loadExamples(`${dataDir}/train-*.recordio`);
  const test = await loadExamples(`${dataDir}/test-*.recordio`);
  const model = tf.sequential({
    layers: [
      tf.layers.dense({ inputShape: [784], units: 128, activation: 'relu' }),
      tf.layers.dense({ units: 10, activation: 'softmax' }),
    ],
  });
  model.compile({ optimizer: tf.train.adam(0.001), loss: 'sparseCategoricalCrossentropy' });
  const accuracy = (): number => {
    let correct = 0;
    for (let start = 0; start < test.size; start += EVALUATION_BATCH_SIZE) {
      const end = Math.min(test.size, start + EVALUATION_BATCH_SIZE);
      correct += tf.tidy(() => {
        const x = tf.tensor2d(test.x.subarray(start * 784, end * 784), [end - start, 784]);
        // `predict` splits its input into batches of 32 unless told otherwise, and the wasm
        // backend's Slice copies the whole input for each of them: that would score in batches
        // of 32 at several times the cost, and measure the machine's memory more than the loop.
        const predicted = (model.predict(x, { batchSize: end - start }) as tf.Tensor).argMax(-1);
        return tf
          .equal(predicted, tf.tensor1d(test.y.subarray(start, end), 'int32'))
          .sum()
          .dataSync()[0]!;
      });
    }
    return correct / test.size;
  };
  const started = performance.now();
  let steps = 0;
  for (let epoch = 0; epoch < MAX_EPOCHS; epoch++) {
    for (let start = 0; start + 1 <= train.size; start += BATCH_SIZE) {
      const end = Math.min(train.size, start + BATCH_SIZE);
      const x = tf.tensor2d(train.x.subarray(start * 784, end * 784), [end - start, 784]);
      // tfjs-layers' sparse categorical cross-entropy floors its labels, which takes float32 only.
      const y = tf.tensor1d(train.y.subarray(start, end), 'float32');
      await model.trainOnBatch(x, y);
      tf.dispose([x, y]);
      steps += 1;
      if (steps % EVALUATE_EVERY_STEPS === 0) {
        const score = accuracy();
        say(`single process: step ${steps}, accuracy ${score.toFixed(4)}`);
        if (score >= target) return { seconds: (performance.now() - started) / 1000, steps, accuracy: score };
      }
    }
  }
  throw new Error(`the single-process loop did not reach ${target} in ${MAX_EPOCHS} epochs`);
}
