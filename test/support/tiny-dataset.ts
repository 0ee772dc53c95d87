import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { SeededRandom } from '#libs/data-order';
import { encodeExample } from '#libs/dataset';
import { decodeBatch, loadLayersModelFromDir } from '#libs/learner';
import { Compressor, expandPatterns, scanRecords, writeRecordFile } from '#libs/recordio';

/** Feature count of the tiny data set. */
export const TINY_FEATURES = 8;
/** Class count of the tiny data set. */
export const TINY_CLASSES = 4;

/** The record layout of the tiny data set, as its job specs declare it. */
export const TINY_LAYOUT = {
  featureShape: [TINY_FEATURES],
  featureDtype: 'float32',
  scale: 1,
  labelDtype: 'int32',
  numClasses: TINY_CLASSES,
} as const;

/** A deterministic pseudo-random generator of numbers in [0, 1): the project's mulberry32. */
export function seededRandom(seed: number): () => number {
  const random = new SeededRandom(seed);
  return () => random.next();
}

/** `count` examples; `labelShift` moves every label to another class (a set no model can score well on). */
function examples(count: number, seed: number, labelShift = 0): Uint8Array[] {
  const rand = seededRandom(seed);
  const out: Uint8Array[] = [];
  for (let i = 0; i < count; i++) {
    const label = i % TINY_CLASSES;
    const features = new Float32Array(TINY_FEATURES);
    for (let f = 0; f < TINY_FEATURES; f++) {
      // Each class is a blob around its own corner: easy to learn, not trivially separable.
      const centre = f % TINY_CLASSES === label ? 1.5 : 0;
      features[f] = centre + (rand() - 0.5) * 2;
    }
    out.push(
      encodeExample({
        features,
        shape: [TINY_FEATURES],
        labelDtype: 'int32',
        label: (label + labelShift) % TINY_CLASSES,
      }),
    );
  }
  return out;
}

/** Where `writeTinyDataset` put its files, as glob patterns. */
export interface TinyDataset {
  train: string[];
  eval: string[];
  trainRecords: number;
  trainChunks: number;
}

/**
 * Writes a small 4-class data set: `files` train shards of `chunksPerFile` chunks of
 * `recordsPerChunk` records, and one eval file.
 */
export async function writeTinyDataset(
  dir: string,
  opts: { files?: number; chunksPerFile?: number; recordsPerChunk?: number; evalRecords?: number } = {},
): Promise<TinyDataset> {
  const files = opts.files ?? 2;
  const chunksPerFile = opts.chunksPerFile ?? 4;
  const recordsPerChunk = opts.recordsPerChunk ?? 64;
  mkdirSync(dir, { recursive: true });
  const recordBytes = examples(1, 0)[0].length;
  const maxChunkSizeBytes = recordBytes * recordsPerChunk;
  for (let f = 0; f < files; f++) {
    const records = examples(chunksPerFile * recordsPerChunk, 1000 + f);
    await writeRecordFile(join(dir, `train-${String(f).padStart(5, '0')}.recordio`), records, {
      maxChunkSizeBytes,
      compressor: Compressor.Snappy,
    });
  }
  await writeTinyEvalSet(dir, { records: opts.evalRecords ?? 256 });
  return {
    train: [join(dir, 'train-*.recordio')],
    eval: [join(dir, 'eval-*.recordio')],
    trainRecords: files * chunksPerFile * recordsPerChunk,
    trainChunks: files * chunksPerFile,
  };
}

/**
 * Writes (or rewrites) the eval file of a tiny data set in `dir`. With `mislabelled`, every label
 * names the wrong class: a model that learnt the training data scores near 0 on it, so a test can
 * hold a job below its target for as long as it needs, then rewrite the set correctly.
 */
export async function writeTinyEvalSet(
  dir: string,
  opts: { records?: number; mislabelled?: boolean } = {},
): Promise<void> {
  const records = examples(opts.records ?? 256, 7, opts.mislabelled ? 1 : 0);
  await writeRecordFile(join(dir, 'eval-00000.recordio'), records, {
    maxChunkSizeBytes: records[0].length * 64,
    compressor: Compressor.None,
  });
}

/** A job spec for the tiny data set; `overrides` are merged one level deep. */
export function tinyJobSpec(id: string, data: TinyDataset, output: string, overrides: Record<string, unknown> = {}) {
  const base: Record<string, Record<string, unknown> | string> = {
    id,
    dataset: {
      train: data.train,
      eval: data.eval,
      layout: { ...TINY_LAYOUT, featureShape: [...TINY_LAYOUT.featureShape] },
    },
    model: { preset: 'mlp', hiddenUnits: [16] },
    optimizer: { type: 'adam', learningRate: 0.01 },
    training: { mode: 'sync', batchSize: 16, chunksPerTask: 1, taskTimeout: { floorMs: 5000, multiplier: 3 }, seed: 1 },
    trainers: { min: 1, max: 8 },
    pservers: { count: 2 },
    evaluation: { everySteps: 10, metric: 'accuracy' },
    stop: { target: 0.9, maxEpochs: 30, maxSeconds: 120 },
    output,
  };
  for (const [k, v] of Object.entries(overrides)) {
    const cur = base[k];
    base[k] =
      typeof cur === 'object' && typeof v === 'object' && v !== null && !Array.isArray(v)
        ? { ...cur, ...(v as object) }
        : (v as string);
  }
  return base;
}

/**
 * Loads the model a job exported to `output` (`model.json` + weights, as `tf.loadLayersModel`
 * would) and returns its accuracy on every record of the tiny data set's eval files.
 */
export async function scoreExportedModel(output: string, data: TinyDataset): Promise<number> {
  const records: Uint8Array[] = [];
  for (const file of await expandPatterns(data.eval)) for await (const r of scanRecords(file)) records.push(r);
  const batch = decodeBatch(records, { ...TINY_LAYOUT, featureShape: [...TINY_LAYOUT.featureShape] });
  const model = await loadLayersModelFromDir(output);
  try {
    return tf.tidy(() => {
      const x = tf.tensor2d(batch.features, [batch.size, TINY_FEATURES]);
      const predicted = (model.predict(x) as tf.Tensor).argMax(-1);
      const correct = predicted.equal(tf.tensor1d(batch.labels, 'int32')).sum().dataSync()[0];
      return correct / batch.size;
    });
  } finally {
    model.dispose();
  }
}
