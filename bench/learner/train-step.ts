/**
 * Training throughput of the TensorFlow.js learner on each available backend: examples per
 * second of `train` + `getUpdate` (one sync-SGD step without the network), for the MLP
 * 784-128-10 at batch 64 and, for comparison, a small CNN on 28x28x1 at batch 32. `--batch N`
 * times both at batch N instead (a GPU backend needs big batches to pay off); `--backend` times
 * the named backends only.
 *
 *   node dist/bench/learner/train-step.js [--seconds 3] [--batch N] [--backend NAME[,NAME...]]
 */
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import {
  BACKEND_CHOICES,
  selectBackend,
  TfjsLearner,
  type Batch,
  type BackendChoice,
  type LearnerSpec,
  type RecordLayout,
  type TfjsLearnerOptions,
} from '#libs/learner';

/** Measuring time per backend and model, after warm-up. */
const DEFAULT_MEASURE_SECONDS = 3;
const WARMUP_STEPS = 3;
const BACKENDS: readonly BackendChoice[] = BACKEND_CHOICES;

/** A model and batch size to time. */
export interface Workload {
  /** The model, e.g. `mlp 784-128-10`. */
  model: string;
  /** The model and the batch size, as tables and result names show them. */
  label: string;
  spec: LearnerSpec;
  batchSize: number;
}

/** `model` at `batchSize`, labelled with both. */
function workload(model: string, spec: LearnerSpec, batchSize: number): Workload {
  return { model, label: `${model}, batch ${batchSize}`, spec, batchSize };
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
  workload(
    'mlp 784-128-10',
    {
      model: { preset: 'mlp', hiddenUnits: [128], activation: 'relu', dropout: 0 },
      layout: { ...FASHION_LAYOUT, featureShape: [784] },
      seed: 1,
    },
    64,
  ),
  workload(
    'cnn 8-16 k3 d64',
    {
      model: { preset: 'cnn', filters: [8, 16], kernelSize: 3, denseUnits: 64, activation: 'relu' },
      layout: { ...FASHION_LAYOUT },
      seed: 1,
    },
    32,
  ),
];

/** A batch of `size` examples of `perExample` uniform random features and random labels 0-9. */
export function randomBatch(size: number, perExample: number): Batch {
  const features = new Float32Array(size * perExample);
  for (let i = 0; i < features.length; i++) features[i] = Math.random();
  const labels = new Int32Array(size);
  for (let i = 0; i < size; i++) labels[i] = Math.floor(Math.random() * 10);
  return { features, labels, size };
}

/** How `measure` trains: on which minibatches, after what warm-up, and which learner. */
export interface MeasureOptions {
  /** Sees the learner once it is initialised, before the first step. */
  prepare?: (learner: TfjsLearner) => void;
  /** The minibatches the steps go round (of the workload's batch size); one of random features by default. */
  batches?: readonly Batch[];
  /** The warm-up lasts this long at least (and a few steps). */
  warmUpSeconds?: number;
  /**
   * The learner's settings (`learnerOptions` of a job): in `delta` mode, the one a `local` job's
   * trainer runs, a step is a `train` alone (the learner steps its own copy with the job's
   * optimizer, and nothing crosses until the round ends); otherwise, a gradient learner, a
   * `setParams`, a `train` and a `getUpdate`.
   */
  learner?: TfjsLearnerOptions;
}

/**
 * Samples per second of one step of a learner on the current backend: `train` + `getUpdate`
 * (after a `setParams`, as one synchronous step without the network) for a gradient learner, the
 * default; `train` alone for a learner in `delta` mode (`MeasureOptions.learner`). Timed for
 * `seconds` after a warm-up of a few steps and of `warmUpSeconds` at least.
 */
export async function measure(
  workload: Workload,
  seconds: number,
  { warmUpSeconds = 0, ...options }: MeasureOptions = {},
): Promise<{ samplesPerSecond: number; msPerStep: number; steps: number }> {
  const learner = await steppingLearner(workload, options);
  try {
    await learner.warmUp(warmUpSeconds);
    const { steps, elapsed } = await timeSteps(learner.step, seconds);
    return { samplesPerSecond: (steps * workload.batchSize) / elapsed, msPerStep: (elapsed * 1000) / steps, steps };
  } finally {
    learner.shutdown();
  }
}

/** A learner that steps as {@link measure} steps it, for a caller that times its steps itself. */
export interface SteppingLearner {
  /** One step, on the next minibatch of those it goes round. */
  step(): Promise<void>;
  /** A few steps, and `seconds` of them at least. */
  warmUp(seconds: number): Promise<void>;
  shutdown(): void;
}

/** The learner {@link measure} times, initialised for `workload` and ready to step. */
export async function steppingLearner(
  workload: Workload,
  { prepare, batches, learner: options = {} }: Omit<MeasureOptions, 'warmUpSeconds'> = {},
): Promise<SteppingLearner> {
  const learner = new TfjsLearner(options);
  await learner.initialize(workload.spec);
  prepare?.(learner);
  const params = await learner.getParams();
  const perExample = workload.spec.layout.featureShape.reduce((a, b) => a * b, 1);
  const pool = batches ?? [randomBatch(workload.batchSize, perExample)];
  let next = 0;
  const step =
    options.mode === 'delta'
      ? async (): Promise<void> => {
          await learner.train(pool[next++ % pool.length]!);
        }
      : async (): Promise<void> => {
          learner.setParams(params);
          await learner.train(pool[next++ % pool.length]!);
          await learner.getUpdate();
        };
  return {
    step,
    warmUp: async (seconds) => {
      const start = process.hrtime.bigint();
      for (let i = 0; i < WARMUP_STEPS || Number(process.hrtime.bigint() - start) / 1e9 < seconds; i++) await step();
    },
    shutdown: () => learner.shutdown(),
  };
}

/** Runs `step` over and over for `seconds` at least; how many ran, and in how many seconds. */
export async function timeSteps(
  step: () => Promise<void>,
  seconds: number,
): Promise<{ steps: number; elapsed: number }> {
  let steps = 0;
  const start = process.hrtime.bigint();
  let elapsed = 0;
  while (elapsed < seconds) {
    await step();
    steps++;
    elapsed = Number(process.hrtime.bigint() - start) / 1e9;
  }
  return { steps, elapsed };
}

/** What the command line asked for. */
export interface TrainStepArgs {
  seconds: number;
  /** Every workload's batch size, when given. */
  batch?: number;
  backends: readonly BackendChoice[];
}

/** Parses the arguments; throws an Error naming the wrong flag or value. */
export function parseTrainStepArgs(argv: readonly string[]): TrainStepArgs {
  const { values } = parseArgs({
    args: [...argv],
    options: { seconds: { type: 'string' }, batch: { type: 'string' }, backend: { type: 'string' } },
    strict: true,
  });
  const positive = (flag: string, text: string | undefined, integer: boolean): number | undefined => {
    if (text === undefined) return undefined;
    const n = Number(text);
    if (!(n > 0) || (integer && !Number.isInteger(n))) {
      throw new Error(`--${flag} must be a positive ${integer ? 'integer' : 'number'}, got '${text}'`);
    }
    return n;
  };
  const backends = values.backend?.split(',') ?? [...BACKENDS];
  const unknown = backends.filter((b) => !(BACKENDS as readonly string[]).includes(b));
  if (unknown.length > 0) {
    throw new Error(`--backend: unknown backend '${unknown.join("', '")}' (one of ${BACKENDS.join(', ')})`);
  }
  return {
    seconds: positive('seconds', values.seconds, false) ?? DEFAULT_MEASURE_SECONDS,
    batch: positive('batch', values.batch, true),
    backends: backends as BackendChoice[],
  };
}

async function main(): Promise<void> {
  let args: TrainStepArgs;
  try {
    args = parseTrainStepArgs(process.argv.slice(2));
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n`);
    process.exit(2);
  }
  const { seconds, batch } = args;
  const workloads = WORKLOADS.map((w) => (batch === undefined ? w : workload(w.model, w.spec, batch)));
  const rows: Record<string, string | number>[] = [];
  for (const choice of args.backends) {
    let backend;
    try {
      backend = await selectBackend(choice);
    } catch (error) {
      const reason = (error as Error).message;
      process.stdout.write(`${choice}: unavailable: ${reason}\n`);
      rows.push({ backend: choice, kind: 'unavailable', workload: reason.slice(0, 60) });
      continue;
    }
    for (const workload of workloads) {
      const r = await measure(workload, seconds);
      rows.push({
        backend: backend.name,
        kind: backend.kind,
        device: backend.device ?? '',
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
