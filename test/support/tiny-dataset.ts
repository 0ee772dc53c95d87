import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { encodeExample } from '#libs/dataset';
import { Compressor, writeRecordFile } from '#libs/recordio';

/** Feature count of the tiny data set. */
export const TINY_FEATURES = 8;
/** Class count of the tiny data set. */
export const TINY_CLASSES = 4;

/** A deterministic pseudo-random generator (mulberry32). */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function examples(count: number, seed: number): Uint8Array[] {
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
    out.push(encodeExample({ features, shape: [TINY_FEATURES], labelDtype: 'int32', label }));
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
  await writeRecordFile(join(dir, 'eval-00000.recordio'), examples(opts.evalRecords ?? 256, 7), {
    maxChunkSizeBytes,
    compressor: Compressor.None,
  });
  return {
    train: [join(dir, 'train-*.recordio')],
    eval: [join(dir, 'eval-*.recordio')],
    trainRecords: files * chunksPerFile * recordsPerChunk,
    trainChunks: files * chunksPerFile,
  };
}

/** A job spec for the tiny data set; `overrides` are merged one level deep. */
export function tinyJobSpec(id: string, data: TinyDataset, output: string, overrides: Record<string, unknown> = {}) {
  const base: Record<string, Record<string, unknown> | string> = {
    id,
    dataset: {
      train: data.train,
      eval: data.eval,
      layout: {
        featureShape: [TINY_FEATURES],
        featureDtype: 'float32',
        scale: 1,
        labelDtype: 'int32',
        numClasses: TINY_CLASSES,
      },
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
