import { InvalidJobSpecError, type JobSpecViolation } from './errors.js';
import { validateJobSpec } from './validate-job-spec.js';

/** A spec under construction; tests break specs on purpose, so drafts are not typed. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Draft = Record<string, any>;

function spec(training: Draft, extra: Draft = {}): Draft {
  return {
    id: 'modes',
    dataset: {
      train: ['data/train-*.recordio'],
      eval: ['data/eval-*.recordio'],
      layout: { featureShape: [4], featureDtype: 'float32', labelDtype: 'int32', numClasses: 3 },
    },
    model: { preset: 'mlp' },
    optimizer: { type: 'sgd', learningRate: 0.1 },
    training: { batchSize: 16, ...training },
    stop: { maxEpochs: 1 },
    output: 'out/modes',
    ...extra,
  };
}

function violationsOf(input: unknown): readonly JobSpecViolation[] {
  try {
    validateJobSpec(input);
  } catch (error) {
    if (error instanceof InvalidJobSpecError) return error.violations;
    throw error;
  }
  throw new Error('expected the spec to be refused');
}

describe('training modes in the job spec', () => {
  it.each([
    ['sync', {}, { backupTrainers: 0 }],
    ['async', {}, { stalenessAware: false }],
    ['ssp', {}, { maxStaleness: 2 }],
    ['local', {}, { localSteps: 4, localSync: true, overlapRounds: false, roundEnd: 'steps' }],
    [
      'local',
      { elasticAlpha: 0.25, localSync: false },
      { localSteps: 4, localSync: false, elasticAlpha: 0.25, overlapRounds: false, roundEnd: 'steps' },
    ],
  ])('training modes - %s gets the defaults of its own fields and no other', (mode, given, expected) => {
    const training = validateJobSpec(spec({ mode, ...given })).training;
    const modeFields = [
      'backupTrainers',
      'stalenessAware',
      'maxStaleness',
      'localSteps',
      'localSync',
      'elasticAlpha',
      'overlapRounds',
      'roundEnd',
    ];
    expect(Object.fromEntries(Object.entries(training).filter(([k]) => modeFields.includes(k)))).toEqual(expected);
  });

  it('training modes - an absent mode is sync, with backupTrainers', () => {
    const training = validateJobSpec(spec({ backupTrainers: 1 }, { trainers: { min: 3 } })).training;
    expect(training).toMatchObject({ mode: 'sync', backupTrainers: 1 });
  });

  it.each([
    ['sync', 'maxStaleness', 1, 'ssp'],
    ['sync', 'localSteps', 2, 'local'],
    ['async', 'backupTrainers', 1, 'sync'],
    ['ssp', 'stalenessAware', true, 'async'],
    ['local', 'maxStaleness', 0, 'ssp'],
    ['ssp', 'elasticAlpha', 0.1, 'local'],
    ['async', 'overlapRounds', true, 'local'],
    ['sync', 'roundEnd', 'first', 'local'],
  ])(
    'training modes - with mode %s, training.%s is refused as a field of another mode',
    (mode, field, value, owner) => {
      expect(violationsOf(spec({ mode, [field]: value }))).toEqual([
        { field: `training.${field}`, reason: `only applies to training.mode ${owner} (the mode is ${mode})` },
      ]);
    },
  );

  it('training modes - overlapRounds is refused with elasticAlpha, which pulls the center before each push', () => {
    expect(violationsOf(spec({ mode: 'local', elasticAlpha: 0.25, overlapRounds: true }))).toEqual([
      {
        field: 'training.overlapRounds',
        reason: 'does not apply with training.elasticAlpha: an elastic trainer pulls the center before each push',
      },
    ]);
    expect(validateJobSpec(spec({ mode: 'local', overlapRounds: true })).training.overlapRounds).toBe(true);
  });

  it.each([
    [{ localSync: false }, 'training.localSync false, whose deltas do not wait for each other'],
    [{ elasticAlpha: 0.25 }, 'training.elasticAlpha, whose rounds pull the center before each push'],
    [{ overlapRounds: true }, 'training.overlapRounds, whose trainers do not wait for the round'],
  ])('training modes - roundEnd first is refused with %j', (given, why) => {
    expect(violationsOf(spec({ mode: 'local', roundEnd: 'first', ...given }))).toEqual([
      { field: 'training.roundEnd', reason: `"first" does not apply with ${why}` },
    ]);
  });

  it('training modes - roundEnd takes steps or first', () => {
    expect(validateJobSpec(spec({ mode: 'local', localSteps: 32, roundEnd: 'first' })).training.roundEnd).toBe('first');
    expect(() => validateJobSpec(spec({ mode: 'local', roundEnd: 'last' }))).toThrow(/training\.roundEnd/);
  });

  it('training modes - backupTrainers must stay below the quorum', () => {
    expect(violationsOf(spec({ backupTrainers: 2 }, { trainers: { min: 2, max: 4 } }))).toEqual([
      {
        field: 'training.backupTrainers',
        reason: 'must be below trainers.min (2), or no step would wait for any trainer (got 2)',
      },
    ]);
    expect(violationsOf(spec({ backupTrainers: 1 }))).toEqual([
      expect.objectContaining({
        field: 'training.backupTrainers',
        reason: expect.stringContaining('trainers.min (1)'),
      }),
    ]);
  });

  it('training modes - ranges are checked with the field path', () => {
    expect(violationsOf(spec({ mode: 'ssp', maxStaleness: -1 }))).toEqual([
      { field: 'training.maxStaleness', reason: 'must be >= 0 (got -1)' },
    ]);
    expect(violationsOf(spec({ mode: 'local', localSteps: 0 }))).toEqual([
      { field: 'training.localSteps', reason: 'must be >= 1 (got 0)' },
    ]);
    expect(violationsOf(spec({ mode: 'local', elasticAlpha: 1 }))).toEqual([
      { field: 'training.elasticAlpha', reason: 'must be < 1 (got 1)' },
    ]);
    expect(violationsOf(spec({ mode: 'local', localSync: 'yes' }))).toEqual([
      { field: 'training.localSync', reason: 'must be a boolean (got "yes")' },
    ]);
    expect(violationsOf(spec({ mode: 'bsp' }))).toEqual([
      { field: 'training.mode', reason: 'must be one of sync, async, ssp, local (got "bsp")' },
    ]);
  });

  it('training modes - local takes the optimizers a trainer can run, without schedule, decay or clipping', () => {
    expect(() =>
      validateJobSpec(spec({ mode: 'local' }, { optimizer: { type: 'adam', learningRate: 0.01 } })),
    ).not.toThrow();
    expect(violationsOf(spec({ mode: 'local' }, { optimizer: { type: 'adamw', learningRate: 0.01 } }))).toEqual([
      {
        field: 'optimizer.type',
        reason: expect.stringMatching(
          /^must be one of sgd, momentum, adam, adagrad, rmsprop with training.mode local: .* \(got "adamw"\)$/,
        ),
      },
      { field: 'optimizer.weightDecay', reason: expect.stringMatching(/^does not apply with training.mode local/) },
    ]);
    const sgd = {
      type: 'sgd',
      learningRate: 0.1,
      weightDecay: 0.01,
      clipNorm: 1,
      schedule: { type: 'step', every: 10 },
    };
    expect(violationsOf(spec({ mode: 'local' }, { optimizer: sgd })).map((v) => v.field)).toEqual([
      'optimizer.schedule',
      'optimizer.weightDecay',
      'optimizer.clipNorm',
    ]);
    expect(() =>
      validateJobSpec(
        spec({ mode: 'local' }, { optimizer: { ...sgd, weightDecay: 0, clipNorm: undefined, schedule: undefined } }),
      ),
    ).not.toThrow();
  });
});
