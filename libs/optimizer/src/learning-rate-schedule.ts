import { InvalidHyperparameterError } from './errors.js';

/**
 * How the learning rate changes with the model version, every field resolved. After
 * `warmupSteps` steps of linear warm-up, the schedule runs on the steps taken since:
 * - `constant`: the base rate throughout;
 * - `step`: the base rate times `factor` after every `every` steps;
 * - `exponential`: the base rate times `decayRate` per `decaySteps` steps, continuously or, with
 *   `staircase`, in whole periods (as `tf.compat.v1.train.exponential_decay`);
 * - `cosine`: from the base rate down to `minLearningRate` along half a cosine over `steps`
 *   steps, then `minLearningRate` (as `tf.keras.optimizers.schedules.CosineDecay`).
 */
export type LearningRateSchedule =
  | { type: 'constant'; warmupSteps: number }
  | { type: 'step'; warmupSteps: number; every: number; factor: number }
  | { type: 'exponential'; warmupSteps: number; decayRate: number; decaySteps: number; staircase: boolean }
  | { type: 'cosine'; warmupSteps: number; steps: number; minLearningRate: number };

/** The kinds of schedule, as `optimizer.schedule.type` names them. */
export const LEARNING_RATE_SCHEDULES = ['constant', 'step', 'exponential', 'cosine'] as const;

/** The schedule of a job that names none. */
export const CONSTANT_SCHEDULE: LearningRateSchedule = { type: 'constant', warmupSteps: 0 };

/** Multiplier of step decay when the spec gives no `factor`. */
export const DEFAULT_STEP_FACTOR = 0.1;

/**
 * The learning rate of the update that takes a shard from `version` to `version + 1`: a pure
 * function of the version, so every shard of a job agrees. During warm-up, update `k` (1 on the
 * first) uses `k / warmupSteps` of the schedule's first rate.
 */
export function scheduledLearningRate(base: number, schedule: LearningRateSchedule, version: number): number {
  const { warmupSteps } = schedule;
  if (version < warmupSteps) return (decayed(base, schedule, 0) * (version + 1)) / warmupSteps;
  return decayed(base, schedule, version - warmupSteps);
}

/** The schedule's rate `steps` steps after the warm-up. */
function decayed(base: number, schedule: LearningRateSchedule, steps: number): number {
  switch (schedule.type) {
    case 'constant':
      return base;
    case 'step':
      return base * schedule.factor ** Math.floor(steps / schedule.every);
    case 'exponential': {
      const periods = steps / schedule.decaySteps;
      return base * schedule.decayRate ** (schedule.staircase ? Math.floor(periods) : periods);
    }
    case 'cosine': {
      const done = Math.min(steps, schedule.steps) / schedule.steps;
      const { minLearningRate } = schedule;
      return minLearningRate + ((base - minLearningRate) * (1 + Math.cos(Math.PI * done))) / 2;
    }
  }
}

type Json = Record<string, unknown>;

/**
 * Reads `optimizer.schedule` from a job spec's JSON (absent: constant) with its defaults, and
 * checks it against the base learning rate.
 * @throws InvalidHyperparameterError naming the field (`schedule.every`, ...) and the reason.
 */
export function resolveLearningRateSchedule(value: unknown, learningRate: number): LearningRateSchedule {
  if (value === undefined) return CONSTANT_SCHEDULE;
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new InvalidHyperparameterError('schedule', value, 'expected an object');
  }
  const given = value as Json;
  const type = given['type'];
  const warmupSteps = integer(given, 'warmupSteps', 0, 0);
  switch (type) {
    case 'constant':
      return { type, warmupSteps };
    case 'step':
      return {
        type,
        warmupSteps,
        every: integer(given, 'every', 1),
        factor: fraction(given, 'factor', DEFAULT_STEP_FACTOR),
      };
    case 'exponential':
      return {
        type,
        warmupSteps,
        decayRate: fraction(given, 'decayRate'),
        decaySteps: integer(given, 'decaySteps', 1),
        staircase: flag(given, 'staircase'),
      };
    case 'cosine': {
      const minLearningRate = number(given, 'minLearningRate', 0);
      if (minLearningRate < 0 || minLearningRate > learningRate) {
        throw new InvalidHyperparameterError(
          'schedule.minLearningRate',
          minLearningRate,
          `must be in [0, learningRate] (learningRate is ${learningRate})`,
        );
      }
      return { type, warmupSteps, steps: integer(given, 'steps', 1), minLearningRate };
    }
    default:
      throw new InvalidHyperparameterError(
        'schedule.type',
        type,
        `expected one of ${LEARNING_RATE_SCHEDULES.join(', ')}`,
      );
  }
}

function number(given: Json, key: string, fallback?: number): number {
  const v = given[key] ?? fallback;
  if (v === undefined) throw new InvalidHyperparameterError(`schedule.${key}`, v, 'is required');
  if (typeof v !== 'number' || !Number.isFinite(v)) {
    throw new InvalidHyperparameterError(`schedule.${key}`, v, 'expected a finite number');
  }
  return v;
}

function integer(given: Json, key: string, min: number, fallback?: number): number {
  const v = number(given, key, fallback);
  if (!Number.isInteger(v) || v < min) {
    throw new InvalidHyperparameterError(`schedule.${key}`, v, `must be an integer >= ${min}`);
  }
  return v;
}

/** A multiplier in (0, 1]. */
function fraction(given: Json, key: string, fallback?: number): number {
  const v = number(given, key, fallback);
  if (!(v > 0 && v <= 1)) throw new InvalidHyperparameterError(`schedule.${key}`, v, 'must be in (0, 1]');
  return v;
}

function flag(given: Json, key: string): boolean {
  const v = given[key] ?? false;
  if (typeof v !== 'boolean') throw new InvalidHyperparameterError(`schedule.${key}`, v, 'expected true or false');
  return v;
}
