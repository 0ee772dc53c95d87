/**
 * Training throughput of the TensorFlow.js learner on each available backend: examples per
 * second of `train` + `getUpdate` (one sync-SGD step without the network), for the MLP
 * 784-128-10 at batch 64 and, for comparison, a small CNN on 28x28x1 at batch 32.
 *
 *   node dist/bench/learner/train-step.js [--seconds 3]
 */
import { pathToFileURL } from 'node:url';
import {
  BACKEND_CHOICES,
  selectBackend,
  TfjsLearner,
  type Batch,
  type BackendChoice,
  type LearnerSpec,
  type RecordLayout,
} from '#libs/learner';

/** Measuring time per backend and model, after warm-up. */
const DEFAULT_MEASURE_SECONDS = 3;
const WARMUP_STEPS = 3;
const BACKENDS: readonly BackendChoice[] = BACKEND_CHOICES;

/** A model and batch size to time. */
export interface Workload {
  label: string;
  spec: LearnerSpec;
  batchSize: number;
}

const FASHION_LAYOUT: RecordLayout = {
  featureShape: [28, 28, 1],
  featureDtype: 'uint8',
  scale: 1 / 255,
  labelDtype: 'int32',
  numClasses: 10,
};

/** The MLP of the example job and a small CNN. */
export const WORKLOADS: Workload[] = [
  {
    label: 'mlp 784-128-10, batch 64',
    spec: {
      model: { preset: 'mlp', hiddenUnits: [128], activation: 'relu', dropout: 0 },
      layout: { ...FASHION_LAYOUT, featureShape: [784] },
      seed: 1,
    },
    batchSize: 64,
  },
  {
    label: 'cnn 8-16 k3 d64, batch 32',
    spec: {
      model: { preset: 'cnn', filters: [8, 16], kernelSize: 3, denseUnits: 64, activation: 'relu' },
      layout: { ...FASHION_LAYOUT },
      seed: 1,
    },
    batchSize: 32,
  },
];

/** A batch of `size` examples of `perExample` uniform random features and random labels 0-9. */
export function randomBatch(size: number, perExample: number): Batch {
  const features = new Float32Array(size * perExample);
  for (let i = 0; i < features.length; i++) features[i] = Math.random();
  const labels = new Int32Array(size);
  for (let i = 0; i < size; i++) labels[i] = Math.floor(Math.random() * 10);
  return { features, labels, size };
}

/**
 * Samples per second of `train` + `getUpdate` (after a `setParams`, as one synchronous step
 * without the network) on the current backend, timed for `seconds` after a warm-up. `prepare`
 * sees the learner once it is initialised, before the first step. The steps go round `batches`
 * (of the workload's batch size), or repeat one batch of random features.
 */
export async function measure(
  workload: Workload,
  seconds: number,
  prepare?: (learner: TfjsLearner) => void,
  batches?: readonly Batch[],
): Promise<{ samplesPerSecond: number; msPerStep: number; steps: number }> {
  const learner = new TfjsLearner();
  await learner.initialize(workload.spec);
  prepare?.(learner);
  const params = await learner.getParams();
  const perExample = workload.spec.layout.featureShape.reduce((a, b) => a * b, 1);
  const pool = batches ?? [randomBatch(workload.batchSize, perExample)];
  let next = 0;
  const step = async (): Promise<void> => {
    learner.setParams(params);
    await learner.train(pool[next++ % pool.length]!);
    await learner.getUpdate();
  };
  for (let i = 0; i < WARMUP_STEPS; i++) await step();
  let steps = 0;
  const start = process.hrtime.bigint();
  let elapsed = 0;
  while (elapsed < seconds) {
    await step();
    steps++;
    elapsed = Number(process.hrtime.bigint() - start) / 1e9;
  }
  learner.shutdown();
  return { samplesPerSecond: (steps * workload.batchSize) / elapsed, msPerStep: (elapsed * 1000) / steps, steps };
}

async function main(): Promise<void> {
  const at = process.argv.indexOf('--seconds');
  const seconds = at > 0 ? Number(process.argv[at + 1]) : DEFAULT_MEASURE_SECONDS;
  const rows: Record<string, string | number>[] = [];
  for (const choice of BACKENDS) {
    let backend;
    try {
      backend = await selectBackend(choice);
    } catch (error) {
      rows.push({ backend: choice, kind: 'unavailable', workload: (error as Error).message.slice(0, 60) });
      continue;
    }
    for (const workload of WORKLOADS) {
      const r = await measure(workload, seconds);
      rows.push({
        backend: backend.name,
        kind: backend.kind,
        threads: backend.threads,
        workload: workload.label,
        'samples/s': Math.round(r.samplesPerSecond),
        'ms/step': Number(r.msPerStep.toFixed(2)),
        steps: r.steps,
      });
    }
  }
  console.table(rows);
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) await main();
