import {
  getOptimizerKernel,
  resolveHyperparams,
  resolveLearningRateSchedule,
  scheduledLearningRate,
  type LearningRateSchedule,
  type OptimizerHyperparams,
  type OptimizerKernel,
} from '#libs/optimizer';
import { InvalidRequestError } from './errors.js';

/** Evaluation snapshot interval when the spec gives none (the job spec's default). */
export const DEFAULT_EVALUATION_EVERY_STEPS = 100;
/** Checkpoint interval when the spec gives none (the job spec's default). */
export const DEFAULT_CHECKPOINT_EVERY_SECONDS = 60;
/** Checkpoints kept per shard when the spec gives no `checkpoint.keep`. */
export const DEFAULT_CHECKPOINTS_KEPT = 2;

/** What a shard takes from a job spec. */
export interface ShardJobSettings {
  kernel: OptimizerKernel;
  /** The hyperparameters, the learning rate being the schedule's base rate. */
  hyper: OptimizerHyperparams;
  /** How the learning rate changes with the version (`stepHyperparams`). */
  schedule: LearningRateSchedule;
  /** `sync`: one step per version once the quorum pushed; `async`: every push is a step. */
  mode: 'sync' | 'async';
  /** Trainers whose pushes a synchronous step waits for, when that many are members. */
  minTrainers: number;
  /** Keep a snapshot for the evaluator every this many versions. */
  evaluationEverySteps: number;
  /** Checkpoint every this many steps; undefined: by time only. */
  checkpointEverySteps?: number;
  checkpointEverySeconds: number;
  /** Checkpoint files kept (at least 2). */
  checkpointKeep: number;
}

type Json = Record<string, unknown>;

function section(spec: Json, name: string): Json {
  const v = spec[name];
  if (v === undefined) return {};
  if (v === null || typeof v !== 'object' || Array.isArray(v)) {
    throw new InvalidRequestError(`spec_json.${name}`, 'expected an object');
  }
  return v as Json;
}

function positiveInteger(
  obj: Json,
  path: string,
  key: string,
  fallback: number | undefined,
  min = 1,
): number | undefined {
  const v = obj[key];
  if (v === undefined) return fallback;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min) {
    throw new InvalidRequestError(
      `spec_json.${path}.${key}`,
      `expected an integer >= ${min}, got ${JSON.stringify(v)}`,
    );
  }
  return v;
}

function optionalNumber(obj: Json, path: string, key: string): number | undefined {
  const v = obj[key];
  if (v === undefined) return undefined;
  if (typeof v !== 'number' || !Number.isFinite(v)) {
    throw new InvalidRequestError(`spec_json.${path}.${key}`, `expected a number, got ${JSON.stringify(v)}`);
  }
  return v;
}

/**
 * Reads the settings a shard needs from a job spec's JSON (`optimizer` and its schedule,
 * `training.mode`, `trainers.min`, `evaluation.everySteps`, `checkpoint`), applying the job
 * spec's defaults to absent fields; `optimizer.clipNorm` and `clipValue` are the trainers' part.
 * Anything unusable is an `InvalidRequestError` naming the field.
 */
export function parseJobSettings(specJson: string): ShardJobSettings {
  let spec: unknown;
  try {
    spec = JSON.parse(specJson);
  } catch (cause) {
    throw new InvalidRequestError('spec_json', `not JSON (${(cause as Error).message})`, { cause });
  }
  if (spec === null || typeof spec !== 'object' || Array.isArray(spec)) {
    throw new InvalidRequestError('spec_json', 'expected a JSON object');
  }
  const root = spec as Json;
  const optimizer = section(root, 'optimizer');
  const type = optimizer.type ?? 'sgd';
  if (typeof type !== 'string') throw new InvalidRequestError('spec_json.optimizer.type', 'expected a string');
  let kernel: OptimizerKernel;
  let hyper: OptimizerHyperparams;
  let schedule: LearningRateSchedule;
  try {
    kernel = getOptimizerKernel(type);
    const number = (key: string) => optionalNumber(optimizer, 'optimizer', key);
    hyper = resolveHyperparams(kernel, {
      learningRate: number('learningRate'),
      momentum: number('momentum'),
      beta1: number('beta1'),
      beta2: number('beta2'),
      epsilon: number('epsilon'),
      initialAccumulatorValue: number('initialAccumulatorValue'),
      decay: number('decay'),
      weightDecay: number('weightDecay'),
      // Checked by resolveHyperparams: anything but a boolean is refused there.
      useNesterov: optimizer.useNesterov as boolean | undefined,
      centered: optimizer.centered as boolean | undefined,
    });
    schedule = resolveLearningRateSchedule(optimizer.schedule, hyper.learningRate);
  } catch (cause) {
    if (cause instanceof InvalidRequestError) throw cause;
    throw new InvalidRequestError('spec_json.optimizer', (cause as Error).message, { cause });
  }
  const training = section(root, 'training');
  const mode = training.mode ?? 'sync';
  if (mode !== 'sync' && mode !== 'async') {
    throw new InvalidRequestError('spec_json.training.mode', `expected "sync" or "async", got ${JSON.stringify(mode)}`);
  }
  const checkpoint = section(root, 'checkpoint');
  const everySeconds = optionalNumber(checkpoint, 'checkpoint', 'everySeconds') ?? DEFAULT_CHECKPOINT_EVERY_SECONDS;
  if (everySeconds <= 0) throw new InvalidRequestError('spec_json.checkpoint.everySeconds', 'must be > 0');
  return {
    kernel,
    hyper,
    schedule,
    mode,
    minTrainers: positiveInteger(section(root, 'trainers'), 'trainers', 'min', 1)!,
    evaluationEverySteps: positiveInteger(
      section(root, 'evaluation'),
      'evaluation',
      'everySteps',
      DEFAULT_EVALUATION_EVERY_STEPS,
    )!,
    checkpointEverySteps: positiveInteger(checkpoint, 'checkpoint', 'everySteps', undefined),
    checkpointEverySeconds: everySeconds,
    checkpointKeep: positiveInteger(checkpoint, 'checkpoint', 'keep', DEFAULT_CHECKPOINTS_KEPT, 2)!,
  };
}

/**
 * The hyperparameters of the step from `version` to `version + 1`: the job's, with the learning
 * rate its schedule gives at that version (the same on every shard).
 */
export function stepHyperparams(
  settings: Pick<ShardJobSettings, 'hyper' | 'schedule'>,
  version: number,
): OptimizerHyperparams {
  const { hyper, schedule } = settings;
  const learningRate = scheduledLearningRate(hyper.learningRate, schedule, version);
  return learningRate === hyper.learningRate ? hyper : { ...hyper, learningRate };
}
