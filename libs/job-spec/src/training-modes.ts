import type { JobSpecViolation } from './errors.js';
import { isRecord } from './field-path.js';
import type { TrainingMode } from './job-spec.js';

/** The `training` fields that belong to one mode, and their defaults (absent: no default). */
export const TRAINING_MODE_FIELDS = {
  sync: { backupTrainers: 0 },
  async: { stalenessAware: false, overlapPushes: false },
  ssp: { maxStaleness: 2 },
  local: { localSteps: 4, localSync: true, elasticAlpha: undefined, overlapRounds: false, roundEnd: 'steps' },
} as const satisfies Record<TrainingMode, Record<string, number | boolean | string | undefined>>;

/** The mode the job spec assumes when `training.mode` is absent. */
export const DEFAULT_TRAINING_MODE: TrainingMode = 'sync';

const OWNER = new Map<string, TrainingMode>(
  Object.entries(TRAINING_MODE_FIELDS).flatMap(([mode, fields]) =>
    Object.keys(fields).map((field) => [field, mode as TrainingMode]),
  ),
);

function modeOf(training: Record<string, unknown>): TrainingMode | undefined {
  const mode = training['mode'] ?? DEFAULT_TRAINING_MODE;
  return typeof mode === 'string' && Object.hasOwn(TRAINING_MODE_FIELDS, mode) ? (mode as TrainingMode) : undefined;
}

/** Optimizers a trainer can run on its own copy of the model (`local` mode); `adamw` has no TF.js counterpart. */
export const LOCAL_OPTIMIZER_TYPES: readonly string[] = ['sgd', 'momentum', 'adam', 'adagrad', 'rmsprop'];

/** Optimizer fields the local steps of `local` trainers do not take. */
const LOCAL_UNSUPPORTED_OPTIMIZER_FIELDS = ['schedule', 'weightDecay', 'clipNorm', 'clipValue'] as const;

/**
 * The violations of the mode fields of `training`: a field of another mode than the job's,
 * `training.backupTrainers` not below the quorum (`trainers.min`), and `local` with an optimizer
 * the trainers cannot run, or with a schedule, weight decay or clipping (which the trainers'
 * local steps do not take). Silent on what it cannot read.
 */
export function trainingModeViolations(spec: Record<string, unknown>): JobSpecViolation[] {
  const training = spec['training'];
  if (!isRecord(training)) return [];
  const mode = modeOf(training);
  if (mode === undefined) return [];
  const out: JobSpecViolation[] = [];
  for (const field of Object.keys(training)) {
    const owner = OWNER.get(field);
    if (owner !== undefined && owner !== mode) {
      out.push({ field: `training.${field}`, reason: `only applies to training.mode ${owner} (the mode is ${mode})` });
    }
  }
  const backup = training['backupTrainers'];
  const trainers = spec['trainers'];
  const min = isRecord(trainers) ? trainers['min'] : undefined;
  if (mode === 'sync' && Number.isInteger(backup) && Number.isInteger(min) && (backup as number) >= (min as number)) {
    out.push({
      field: 'training.backupTrainers',
      reason: `must be below trainers.min (${String(min)}), or no step would wait for any trainer (got ${String(backup)})`,
    });
  }
  const optimizer = spec['optimizer'];
  const type = isRecord(optimizer) ? optimizer['type'] : undefined;
  if (mode === 'local' && typeof type === 'string' && !LOCAL_OPTIMIZER_TYPES.includes(type)) {
    out.push({
      field: 'optimizer.type',
      reason: `must be one of ${LOCAL_OPTIMIZER_TYPES.join(', ')} with training.mode local: the trainers run it on their own copies and the parameter servers add their deltas (got ${JSON.stringify(type)})`,
    });
  }
  if (mode === 'local' && isRecord(optimizer)) {
    for (const field of LOCAL_UNSUPPORTED_OPTIMIZER_FIELDS) {
      const value = optimizer[field];
      if (value === undefined || (field === 'weightDecay' && value === 0)) continue;
      out.push({
        field: `optimizer.${field}`,
        reason: `does not apply with training.mode local: the trainers take their local steps at optimizer.learningRate`,
      });
    }
  }
  if (mode === 'local' && training['roundEnd'] === 'first') {
    const alone =
      training['localSync'] === false
        ? 'training.localSync false, whose deltas do not wait for each other'
        : training['elasticAlpha'] !== undefined
          ? 'training.elasticAlpha, whose rounds pull the center before each push'
          : training['overlapRounds'] === true
            ? 'training.overlapRounds, whose trainers do not wait for the round'
            : undefined;
    if (alone !== undefined) {
      out.push({ field: 'training.roundEnd', reason: `"first" does not apply with ${alone}` });
    }
  }
  if (mode === 'local' && training['overlapRounds'] === true && training['elasticAlpha'] !== undefined) {
    out.push({
      field: 'training.overlapRounds',
      reason: 'does not apply with training.elasticAlpha: an elastic trainer pulls the center before each push',
    });
  }
  return out;
}

/** Fills in the defaults of the job's mode fields (`training` is valid). */
export function applyTrainingModeDefaults(training: Record<string, unknown>): void {
  const mode = modeOf(training);
  if (mode === undefined) return;
  for (const [field, value] of Object.entries(TRAINING_MODE_FIELDS[mode])) {
    if (value !== undefined && !Object.hasOwn(training, field)) training[field] = value;
  }
}
