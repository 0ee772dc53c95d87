import {
  getOptimizerKernel,
  resolveHyperparams,
  resolveLearningRateSchedule,
  scheduledLearningRate,
  type LearningRateSchedule,
  type OptimizerHyperparams,
  type OptimizerKernel,
} from '#libs/optimizer';
import { DEFAULT_TRAINING_MODE, TRAINING_MODE_FIELDS, type TrainingMode } from '#libs/job-spec';
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
  /**
   * `sync`: one step per version once the quorum pushed; `async`: every push is a step; `ssp`:
   * sync, with pushes taken up to `maxStaleness` versions ahead; `local`: pushes are parameter
   * deltas, added per round (`localSync`) or as they come.
   */
  mode: TrainingMode;
  /** Trainers whose pushes a synchronous step waits for, when that many are members. */
  minTrainers: number;
  /** `sync`: counted members a step does not wait for; 0 in other modes. */
  backupTrainers: number;
  /** `async`: a push `s` versions old is applied with the learning rate divided by max(1, s). */
  stalenessAware: boolean;
  /** `ssp`: versions past the open one a push may count in; 0 in other modes. */
  maxStaleness: number;
  /** `local`: deltas are averaged over a round, as in sync; false in other modes. */
  localSync: boolean;
  /** `local`: elastic averaging; a round adds the sum of the pushes rather than their average. */
  elastic: boolean;
  /**
   * `local` with `localSync` and `roundEnd: first`: the first delta of a round that still waits
   * for others is announced (`JobShardHooks.onRoundWaiting`), so the trainers end it.
   */
  firstEndsRound: boolean;
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
 * True when the job steps by rounds through the barrier (`sync`, `ssp`, `local` with
 * `localSync`): one step per version once the quorum pushed for it. Otherwise every push is a
 * step of its own.
 */
export function stepsByRound(settings: Pick<ShardJobSettings, 'mode' | 'localSync'>): boolean {
  return settings.mode === 'sync' || settings.mode === 'ssp' || settings.localSync;
}

type ModeSettings = Pick<
  ShardJobSettings,
  'mode' | 'backupTrainers' | 'stalenessAware' | 'maxStaleness' | 'localSync' | 'elastic' | 'firstEndsRound'
>;

/** The settings of the job's training mode; the fields of other modes are ignored. */
function modeSettings(training: Json, mode: TrainingMode): ModeSettings {
  const defaults: Record<string, unknown> = TRAINING_MODE_FIELDS[mode];
  const own: Json = Object.fromEntries(Object.keys(defaults).map((k) => [k, training[k] ?? defaults[k]]));
  return {
    mode,
    backupTrainers: mode === 'sync' ? positiveInteger(own, 'training', 'backupTrainers', 0, 0)! : 0,
    stalenessAware: mode === 'async' && booleanField(own, 'training', 'stalenessAware'),
    maxStaleness: mode === 'ssp' ? positiveInteger(own, 'training', 'maxStaleness', 0, 0)! : 0,
    localSync: mode === 'local' && booleanField(own, 'training', 'localSync'),
    elastic: mode === 'local' && optionalNumber(own, 'training', 'elasticAlpha') !== undefined,
    firstEndsRound: mode === 'local' && roundEnd(own) === 'first',
  };
}

function roundEnd(training: Json): 'steps' | 'first' {
  const v = training['roundEnd'];
  if (v !== 'steps' && v !== 'first') {
    throw new InvalidRequestError(
      'spec_json.training.roundEnd',
      `expected "steps" or "first", got ${JSON.stringify(v)}`,
    );
  }
  return v;
}

function booleanField(obj: Json, path: string, key: string): boolean {
  const v = obj[key];
  if (typeof v !== 'boolean') {
    throw new InvalidRequestError(`spec_json.${path}.${key}`, `expected true or false, got ${JSON.stringify(v)}`);
  }
  return v;
}

/**
 * Reads the settings a shard needs from a job spec's JSON (`optimizer` and its schedule,
 * `training.mode` and its fields, `trainers.min`, `evaluation.everySteps`, `checkpoint`),
 * applying the job spec's defaults to absent fields; `optimizer.clipNorm` and `clipValue` are the
 * trainers' part. Anything unusable is an `InvalidRequestError` naming the field.
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
  const mode = training.mode ?? DEFAULT_TRAINING_MODE;
  if (typeof mode !== 'string' || !Object.hasOwn(TRAINING_MODE_FIELDS, mode)) {
    throw new InvalidRequestError(
      'spec_json.training.mode',
      `expected one of ${Object.keys(TRAINING_MODE_FIELDS).join(', ')}, got ${JSON.stringify(mode)}`,
    );
  }
  const checkpoint = section(root, 'checkpoint');
  const everySeconds = optionalNumber(checkpoint, 'checkpoint', 'everySeconds') ?? DEFAULT_CHECKPOINT_EVERY_SECONDS;
  if (everySeconds <= 0) throw new InvalidRequestError('spec_json.checkpoint.everySeconds', 'must be > 0');
  return {
    kernel,
    hyper,
    schedule,
    ...modeSettings(training, mode as TrainingMode),
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
