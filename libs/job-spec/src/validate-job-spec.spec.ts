import { readFileSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

import { InvalidJobSpecError, type JobSpecViolation } from './errors.js';
import type { JobSpec } from './job-spec.js';
import { validateJobSpec } from './validate-job-spec.js';

const EXAMPLES_DIR = fileURLToPath(new URL('../../../examples/', import.meta.url));

function example(name: string): Record<string, unknown> {
  return JSON.parse(readFileSync(`${EXAMPLES_DIR}${name}.json`, 'utf8')) as Record<string, unknown>;
}

/** A spec under construction; tests break specs on purpose, so drafts are not typed. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Draft = Record<string, any>;

/** A small valid classification spec with nothing optional filled in. */
function minimalSpec(): Draft {
  return {
    id: 'minimal',
    dataset: {
      train: ['data/train-*.recordio'],
      eval: ['data/eval-*.recordio'],
      layout: { featureShape: [4], featureDtype: 'float32', labelDtype: 'int32', numClasses: 3 },
    },
    model: { preset: 'mlp' },
    optimizer: { type: 'sgd', learningRate: 0.1 },
    training: { batchSize: 16 },
    stop: { maxEpochs: 1 },
    output: 'out/minimal',
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

function withChange(change: (spec: Draft) => void): Draft {
  const spec = minimalSpec();
  change(spec);
  return spec;
}

describe('job spec validation', () => {
  it('job spec - every example validates', () => {
    const names = readdirSync(EXAMPLES_DIR).filter((f) => f.endsWith('.json'));
    expect(names).toEqual(
      expect.arrayContaining([
        'fashion-mnist-mlp.json',
        'fashion-mnist-mlp-gpu.json',
        'fashion-mnist-cnn.json',
        'tiny-regression.json',
      ]),
    );
    for (const name of names) {
      const spec = validateJobSpec(example(name.replace(/\.json$/, '')));
      expect(spec.id).toBe(name.replace(/\.json$/, ''));
    }
  });

  it('job spec - the fashion-mnist mlp example says what the README promises', () => {
    const spec = validateJobSpec(example('fashion-mnist-mlp'));
    expect(spec.dataset.layout).toEqual({
      featureShape: [784],
      featureDtype: 'uint8',
      scale: 1 / 255,
      labelDtype: 'int32',
      numClasses: 10,
    });
    expect(spec.model).toEqual({ preset: 'mlp', hiddenUnits: [128], activation: 'relu', dropout: 0 });
    expect(spec.optimizer).toEqual({
      type: 'adam',
      learningRate: 0.001,
      beta1: 0.9,
      beta2: 0.999,
      epsilon: 1e-7,
      weightDecay: 0,
    });
    expect(spec.trainers).toEqual({ min: 1, max: 8 });
    expect(spec.pservers).toEqual({ count: 2 });
    expect(spec.stop).toEqual({ target: 0.85, patience: 10, maxEpochs: 10, maxSeconds: 1800 });
    expect(spec).not.toHaveProperty('$schema');
  });

  it('job spec - defaults fill every optional section', () => {
    const spec: JobSpec = validateJobSpec(minimalSpec());
    expect(spec).toEqual({
      id: 'minimal',
      dataset: {
        train: ['data/train-*.recordio'],
        eval: ['data/eval-*.recordio'],
        layout: { featureShape: [4], featureDtype: 'float32', scale: 1, labelDtype: 'int32', numClasses: 3 },
      },
      model: { preset: 'mlp', hiddenUnits: [128], activation: 'relu', dropout: 0 },
      optimizer: { type: 'sgd', learningRate: 0.1, weightDecay: 0 },
      training: {
        mode: 'sync',
        backupTrainers: 0,
        batchSize: 16,
        chunksPerTask: 1,
        maxTaskFailures: 3,
        maxGradientRetries: 5,
        taskTimeout: { floorMs: 30000, multiplier: 3 },
        shuffle: true,
      },
      trainers: { min: 1, max: 64 },
      pservers: { count: 1 },
      transfer: { dtype: 'float32', params: 'float32' },
      evaluation: { everySteps: 100, metric: 'accuracy', batchSize: 1000 },
      stop: { maxEpochs: 1 },
      checkpoint: { everySeconds: 60, keep: 2 },
      output: 'out/minimal',
    });
  });

  it('job spec - defaults of the cnn preset and the momentum and adam optimizers', () => {
    const cnn = validateJobSpec(
      withChange((s) => {
        s.dataset.layout.featureShape = [28, 28, 1];
        s.model = { preset: 'cnn' };
        s.optimizer = { type: 'momentum', learningRate: 0.01 };
      }),
    );
    expect(cnn.model).toEqual({ preset: 'cnn', filters: [16, 32], kernelSize: 3, denseUnits: 64, activation: 'relu' });
    expect(cnn.optimizer).toEqual({
      type: 'momentum',
      learningRate: 0.01,
      momentum: 0.9,
      useNesterov: false,
      weightDecay: 0,
    });
  });

  it('job spec - defaults of adagrad, rmsprop, adamw and of each learning-rate schedule', () => {
    const optimizer = (o: Draft) => validateJobSpec(withChange((s) => (s.optimizer = o))).optimizer;
    expect(optimizer({ type: 'adagrad', learningRate: 0.1 })).toEqual({
      type: 'adagrad',
      learningRate: 0.1,
      initialAccumulatorValue: 0.1,
      epsilon: 1e-7,
      weightDecay: 0,
    });
    expect(optimizer({ type: 'rmsprop', learningRate: 0.1 })).toEqual({
      type: 'rmsprop',
      learningRate: 0.1,
      decay: 0.9,
      momentum: 0,
      epsilon: 1e-7,
      centered: false,
      weightDecay: 0,
    });
    expect(optimizer({ type: 'adamw', learningRate: 0.1, clipNorm: 1, clipValue: 0.5 })).toEqual({
      type: 'adamw',
      learningRate: 0.1,
      beta1: 0.9,
      beta2: 0.999,
      epsilon: 1e-7,
      weightDecay: 0.004,
      clipNorm: 1,
      clipValue: 0.5,
    });
    const schedule = (given: Draft) => optimizer({ type: 'sgd', learningRate: 0.1, schedule: given }).schedule;
    expect(schedule({ type: 'constant' })).toEqual({ type: 'constant', warmupSteps: 0 });
    expect(schedule({ type: 'step', every: 100 })).toEqual({ type: 'step', every: 100, factor: 0.1, warmupSteps: 0 });
    expect(schedule({ type: 'exponential', decayRate: 0.96, decaySteps: 1000, warmupSteps: 50 })).toEqual({
      type: 'exponential',
      decayRate: 0.96,
      decaySteps: 1000,
      staircase: false,
      warmupSteps: 50,
    });
    expect(schedule({ type: 'cosine', steps: 5000 })).toEqual({
      type: 'cosine',
      steps: 5000,
      minLearningRate: 0,
      warmupSteps: 0,
    });
  });

  it('job spec - data order: shuffle on by default, a buffer size and a seed taken as given', () => {
    const spec = validateJobSpec(withChange((s) => (s.training = { batchSize: 8, seed: -12, shuffleBuffer: 500 })));
    expect(spec.training).toMatchObject({ seed: -12, shuffle: true, shuffleBuffer: 500 });
    const plain = validateJobSpec(withChange((s) => (s.training = { batchSize: 8, shuffle: false })));
    expect(plain.training.shuffle).toBe(false);
    expect(plain.training).not.toHaveProperty('shuffleBuffer');
    expect(plain.training).not.toHaveProperty('seed');
  });

  it('job spec - data order fields are refused with their path and reason', () => {
    const training = (fields: Draft) => withChange((s) => Object.assign(s.training, fields));
    expect(violationsOf(training({ shuffleBuffer: 0 }))).toEqual([
      { field: 'training.shuffleBuffer', reason: 'must be >= 1 (got 0)' },
    ]);
    expect(violationsOf(training({ shuffleBuffer: 2.5 }))).toEqual([
      { field: 'training.shuffleBuffer', reason: 'must be an integer (got 2.5)' },
    ]);
    expect(violationsOf(training({ shuffle: 'yes' }))).toEqual([
      { field: 'training.shuffle', reason: 'must be a boolean (got "yes")' },
    ]);
    expect(violationsOf(training({ seed: 1.5 }))).toEqual([
      { field: 'training.seed', reason: 'must be an integer (got 1.5)' },
    ]);
    expect(violationsOf(training({ shuffle: false, shuffleBuffer: 64 }))).toEqual([
      { field: 'training.shuffleBuffer', reason: 'applies only when training.shuffle is true' },
    ]);
  });

  it('job spec - the default metric is loss for regression', () => {
    const spec = validateJobSpec(
      withChange((s) => {
        delete s.dataset.layout.numClasses;
        s.dataset.layout.labelDtype = 'float32';
      }),
    );
    expect(spec.evaluation.metric).toBe('loss');
  });

  it('job spec - validation leaves its input alone and shares nothing with it', () => {
    const input = minimalSpec();
    const before = structuredClone(input);
    const spec = validateJobSpec(input);
    expect(input).toEqual(before);
    expect(spec.dataset.train).not.toBe(input.dataset.train);
    const again = validateJobSpec(input);
    expect(again.model).not.toBe(spec.model);
    expect((again.model as { hiddenUnits: number[] }).hiddenUnits).not.toBe(
      (spec.model as { hiddenUnits: number[] }).hiddenUnits,
    );
  });

  it('job spec - a validated spec validates again to itself', () => {
    for (const name of ['fashion-mnist-mlp', 'fashion-mnist-cnn', 'tiny-regression']) {
      const spec = validateJobSpec(example(name));
      expect(validateJobSpec(spec)).toEqual(spec);
    }
  });

  it('job spec - a topology is accepted as model.toJSON output or inside a model.json object', () => {
    const topology = {
      class_name: 'Sequential',
      config: { name: 'seq', layers: [{ class_name: 'Dense', config: { units: 3, batch_input_shape: [null, 4] } }] },
      keras_version: 'tfjs-layers 4.22.0',
      backend: 'tensor_flow.js',
    };
    const direct = validateJobSpec(withChange((s) => (s.model = { topology })));
    expect(direct.model).toEqual({ topology });
    const wrapped = validateJobSpec(
      withChange((s) => (s.model = { topology: { modelTopology: topology, weightsManifest: [] } })),
    );
    expect(wrapped.model).toEqual({ topology });
    const keras = validateJobSpec(
      withChange((s) => (s.model = { topology: { modelTopology: { model_config: topology, training_config: {} } } })),
    );
    expect(keras.model).toEqual({ topology });
    expect(direct.model.preset).toBeUndefined();
  });
});

describe('job spec violations', () => {
  it('job spec - an unknown field is named, with a suggestion for a typo', () => {
    expect(violationsOf(withChange((s) => (s.optimizer = { type: 'sgd', learningRate: 0.1, lerningRate: 1 })))).toEqual(
      [{ field: 'optimizer.lerningRate', reason: 'unknown field (did you mean learningRate?)' }],
    );
    expect(violationsOf(withChange((s) => (s.colour = 'blue')))).toEqual([
      { field: 'colour', reason: expect.stringMatching(/^unknown field \(allowed: id, dataset, model, /) },
    ]);
  });

  it('job spec - fields of another preset or optimizer are unknown fields', () => {
    expect(violationsOf(withChange((s) => (s.model = { preset: 'mlp', filters: [8] })))).toEqual([
      { field: 'model.filters', reason: 'unknown field (allowed: preset, hiddenUnits, activation, dropout)' },
    ]);
    expect(violationsOf(withChange((s) => (s.optimizer = { type: 'sgd', learningRate: 0.1, beta1: 0.9 })))).toEqual([
      {
        field: 'optimizer.beta1',
        reason: 'unknown field (allowed: type, learningRate, schedule, weightDecay, clipNorm, clipValue)',
      },
    ]);
    expect(
      violationsOf(withChange((s) => (s.model = { preset: 'mlp', topology: { class_name: 'x', config: {} } }))),
    ).toEqual([{ field: 'model.preset', reason: 'unknown field (allowed: topology)' }]);
  });

  it('job spec - a wrong type names the expected type and what was given', () => {
    expect(violationsOf(withChange((s) => (s.training.batchSize = '64')))).toEqual([
      { field: 'training.batchSize', reason: 'must be an integer (got "64")' },
    ]);
    expect(violationsOf(withChange((s) => (s.dataset.train = ['a', 7])))).toEqual([
      { field: 'dataset.train[1]', reason: 'must be a string (got 7)' },
    ]);
    expect(violationsOf([])).toEqual([{ field: '(root)', reason: 'must be an object (got an array)' }]);
  });

  it('job spec - an enum lists the allowed values', () => {
    expect(violationsOf(withChange((s) => (s.optimizer.type = 'nadam')))).toEqual([
      { field: 'optimizer.type', reason: 'must be one of sgd, momentum, adam, adagrad, rmsprop, adamw (got "nadam")' },
    ]);
  });

  it('job spec - optimizer fields and schedules are refused naming the field path', () => {
    const refused = (o: Draft) => violationsOf(withChange((s) => (s.optimizer = o)));
    expect(refused({ type: 'sgd', learningRate: 0.1, schedule: { type: 'step', every: 0 } })).toEqual([
      { field: 'optimizer.schedule.every', reason: 'must be >= 1 (got 0)' },
    ]);
    expect(refused({ type: 'sgd', learningRate: 0.1, schedule: { type: 'step', every: 2.5 } })).toEqual([
      { field: 'optimizer.schedule.every', reason: 'must be an integer (got 2.5)' },
    ]);
    expect(refused({ type: 'sgd', learningRate: 0.1, schedule: { type: 'step' } })).toEqual([
      { field: 'optimizer.schedule.every', reason: 'is required' },
    ]);
    expect(
      refused({ type: 'sgd', learningRate: 0.1, schedule: { type: 'exponential', decayRate: 0, decaySteps: 10 } }),
    ).toEqual([{ field: 'optimizer.schedule.decayRate', reason: 'must be > 0 (got 0)' }]);
    expect(refused({ type: 'sgd', learningRate: 0.1, schedule: { type: 'cosine', steps: 10, every: 3 } })).toEqual([
      {
        field: 'optimizer.schedule.every',
        reason: 'unknown field (allowed: type, steps, minLearningRate, warmupSteps)',
      },
    ]);
    expect(refused({ type: 'sgd', learningRate: 0.1, schedule: { type: 'linear' } })).toEqual([
      { field: 'optimizer.schedule.type', reason: 'must be one of constant, step, exponential, cosine (got "linear")' },
    ]);
    expect(refused({ type: 'sgd', learningRate: 0.1, schedule: { type: 'constant', warmupSteps: -1 } })).toEqual([
      { field: 'optimizer.schedule.warmupSteps', reason: 'must be >= 0 (got -1)' },
    ]);
    expect(
      refused({ type: 'sgd', learningRate: 0.01, schedule: { type: 'cosine', steps: 10, minLearningRate: 0.1 } }),
    ).toEqual([
      { field: 'optimizer.schedule.minLearningRate', reason: 'must be <= optimizer.learningRate (0.01) (got 0.1)' },
    ]);
    expect(refused({ type: 'adam', learningRate: 0.1, clipNorm: 0, clipValue: -1, weightDecay: -0.1 })).toEqual([
      { field: 'optimizer.weightDecay', reason: 'must be >= 0 (got -0.1)' },
      { field: 'optimizer.clipNorm', reason: 'must be > 0 (got 0)' },
      { field: 'optimizer.clipValue', reason: 'must be > 0 (got -1)' },
    ]);
    expect(refused({ type: 'momentum', learningRate: 0.1, useNesterov: 'yes' })).toEqual([
      { field: 'optimizer.useNesterov', reason: 'must be a boolean (got "yes")' },
    ]);
    expect(refused({ type: 'rmsprop', learningRate: 0.1, decay: 1, centered: 1 })).toEqual([
      { field: 'optimizer.decay', reason: 'must be < 1 (got 1)' },
      { field: 'optimizer.centered', reason: 'must be a boolean (got 1)' },
    ]);
    expect(refused({ type: 'adagrad', learningRate: 0.1, initialAccumulatorValue: -1, useNesterov: true })).toEqual([
      {
        field: 'optimizer.useNesterov',
        reason:
          'unknown field (allowed: type, learningRate, initialAccumulatorValue, epsilon, schedule, weightDecay, clipNorm, clipValue)',
      },
      { field: 'optimizer.initialAccumulatorValue', reason: 'must be >= 0 (got -1)' },
    ]);
  });

  it('job spec - transfer types are checked field by field', () => {
    expect(validateJobSpec(withChange((s) => (s.transfer = { dtype: 'bfloat16' }))).transfer).toEqual({
      dtype: 'bfloat16',
      params: 'float32',
    });
    expect(violationsOf(withChange((s) => (s.transfer = { dtype: 'float8', params: 'half' })))).toEqual([
      { field: 'transfer.dtype', reason: 'must be one of float32, float16, bfloat16 (got "float8")' },
      { field: 'transfer.params', reason: 'must be one of float32, float16, bfloat16 (got "half")' },
    ]);
    expect(violationsOf(withChange((s) => (s.transfer = { gradients: 'float16' })))).toEqual([
      { field: 'transfer.gradients', reason: 'unknown field (allowed: dtype, params)' },
    ]);
    expect(violationsOf(withChange((s) => (s.transfer = 'float16')))).toEqual([
      { field: 'transfer', reason: 'must be an object (got "float16")' },
    ]);
  });

  it('job spec - limits name the bound and the value', () => {
    expect(violationsOf(withChange((s) => (s.optimizer.learningRate = 0)))).toEqual([
      { field: 'optimizer.learningRate', reason: 'must be > 0 (got 0)' },
    ]);
    expect(violationsOf(withChange((s) => (s.training.taskTimeout = { floorMs: 10 })))).toEqual([
      { field: 'training.taskTimeout.floorMs', reason: 'must be >= 1000 (got 10)' },
    ]);
    expect(violationsOf(withChange((s) => (s.model.dropout = 1)))).toEqual([
      { field: 'model.dropout', reason: 'must be < 1 (got 1)' },
    ]);
    expect(violationsOf(withChange((s) => (s.dataset.eval = [])))).toEqual([
      { field: 'dataset.eval', reason: 'must have at least 1 entry' },
    ]);
    expect(violationsOf(withChange((s) => (s.output = '')))).toEqual([
      { field: 'output', reason: 'must not be empty' },
    ]);
  });

  it('job spec - missing fields are named one by one', () => {
    expect(violationsOf({})).toEqual(
      ['id', 'dataset', 'model', 'optimizer', 'training', 'stop', 'output'].map((field) => ({
        field,
        reason: 'is required',
      })),
    );
    expect(violationsOf(withChange((s) => (s.model = {})))).toEqual([
      { field: 'model', reason: 'needs either preset (mlp or cnn) or topology' },
    ]);
  });

  it('job spec - a bad id says what an id may hold', () => {
    const error = (() => {
      try {
        validateJobSpec(withChange((s) => (s.id = 'My Job')));
      } catch (e) {
        return e as InvalidJobSpecError;
      }
      throw new Error('expected a refusal');
    })();
    expect(error.violations).toEqual([
      {
        field: 'id',
        reason: expect.stringMatching(/^must be 1 to 63 characters of a-z, 0-9, _ and -.*\(got "My Job"\)$/),
      },
    ]);
    expect(error.jobId).toBe('My Job');
  });

  it('job spec - stop needs at least one condition', () => {
    expect(violationsOf(withChange((s) => (s.stop = {})))).toEqual([
      { field: 'stop', reason: 'needs at least one of target, patience, maxEpochs, maxSeconds' },
    ]);
  });

  it('job spec - cross-field rules name the fields involved', () => {
    expect(violationsOf(withChange((s) => (s.trainers = { min: 2, max: 1 })))).toEqual([
      { field: 'trainers', reason: 'max (1) must be >= min (2)' },
    ]);
    expect(violationsOf(withChange((s) => (s.trainers = { min: 65 })))).toEqual([
      { field: 'trainers', reason: 'max (64) must be >= min (65)' },
    ]);
    expect(
      violationsOf(
        withChange((s) => {
          delete s.dataset.layout.numClasses;
          s.evaluation = { metric: 'accuracy' };
        }),
      ),
    ).toEqual([
      { field: 'evaluation.metric', reason: expect.stringMatching(/^accuracy needs dataset\.layout\.numClasses/) },
    ]);
    expect(violationsOf(withChange((s) => (s.stop.target = 85)))).toEqual([
      { field: 'stop.target', reason: 'must be in (0, 1] for metric accuracy (got 85)' },
    ]);
    const lossTarget = withChange((s) => {
      s.evaluation = { metric: 'loss' };
      s.stop.target = -0.5;
    });
    expect(violationsOf(lossTarget)).toEqual([
      { field: 'stop.target', reason: 'must be >= 0 for metric loss (got -0.5)' },
    ]);
    expect(violationsOf(withChange((s) => (s.dataset.layout.labelDtype = 'float32')))).toEqual([
      {
        field: 'dataset.layout.labelDtype',
        reason: 'must be int32 for classification (dataset.layout.numClasses is set)',
      },
    ]);
  });

  it('job spec - the cnn preset needs an image-shaped input deep enough for its layers', () => {
    const cnn = (featureShape: number[], filters?: number[]) =>
      withChange((s) => {
        s.dataset.layout.featureShape = featureShape;
        s.model = filters === undefined ? { preset: 'cnn' } : { preset: 'cnn', filters };
      });
    expect(validateJobSpec(cnn([784])).dataset.layout.featureShape).toEqual([784]);
    expect(validateJobSpec(cnn([32, 32, 3]))).toBeDefined();
    expect(violationsOf(cnn([10]))).toEqual([
      { field: 'dataset.layout.featureShape', reason: expect.stringMatching(/cnn preset needs .*\(got \[10\]\)$/) },
    ]);
    expect(violationsOf(cnn([28, 28]))).toHaveLength(1);
    expect(violationsOf(cnn([28, 28, 1], [8, 8, 8, 8, 8, 8]))).toEqual([
      {
        field: 'model.filters',
        reason: 'has 6 convolution layers but a 28x28 input allows at most 4 (each layer halves height and width)',
      },
    ]);
  });

  it('job spec - a topology must be a layers model', () => {
    expect(violationsOf(withChange((s) => (s.model = { topology: { layers: [] } })))).toEqual([
      { field: 'model.topology', reason: expect.stringMatching(/^must be a layers model topology/) },
    ]);
    expect(violationsOf(withChange((s) => (s.model = { topology: 'Sequential' })))).toEqual([
      { field: 'model.topology', reason: 'must be an object (got "Sequential")' },
    ]);
    const cyclic: Record<string, unknown> = { class_name: 'Sequential', config: {} };
    (cyclic['config'] as Record<string, unknown>)['self'] = cyclic;
    expect(violationsOf(withChange((s) => (s.model = { topology: cyclic })))).toEqual([
      { field: 'model.topology.config.self', reason: 'must be JSON data (got a circular reference)' },
    ]);
  });

  it('job spec - several violations are reported at once, in document order', () => {
    const input = withChange((s) => {
      s.id = 'my-job';
      s.output = 3;
      s.trainers = { min: 2, max: 1 };
      s.optimizer = { type: 'adam', learningRate: -1, beta2: 1 };
      s.dataset.layout.featureDtype = 'int8';
    });
    let error: InvalidJobSpecError | undefined;
    try {
      validateJobSpec(input);
    } catch (e) {
      error = e as InvalidJobSpecError;
    }
    expect(error).toBeInstanceOf(InvalidJobSpecError);
    expect(error!.violations.map((v) => v.field)).toEqual([
      'dataset.layout.featureDtype',
      'optimizer.learningRate',
      'optimizer.beta2',
      'trainers',
      'output',
    ]);
    expect(error!.message).toBe(
      'invalid job spec "my-job": dataset.layout.featureDtype: must be one of uint8, float32 (got "int8"); ' +
        'optimizer.learningRate: must be > 0 (got -1); optimizer.beta2: must be < 1 (got 1); ' +
        'trainers: max (1) must be >= min (2); output: must be a string (got 3)',
    );
    expect(error!.name).toBe('InvalidJobSpecError');
  });

  it('job spec - values that JSON cannot carry are refused where they are', () => {
    expect(violationsOf(withChange((s) => (s.optimizer.learningRate = Number.NaN)))).toEqual([
      { field: 'optimizer.learningRate', reason: 'must be JSON data (got NaN)' },
    ]);
    expect(violationsOf(withChange((s) => (s.training = new Date(0))))).toEqual([
      { field: 'training', reason: 'must be JSON data (got a Date)' },
    ]);
    expect(
      violationsOf(
        withChange((s) => (s.model = { topology: { class_name: 'Sequential', config: { layers: new Map() } } })),
      ),
    ).toEqual([{ field: 'model.topology.config.layers', reason: 'must be JSON data (got a Map)' }]);
    const holey = ['a', 'x', 'b'];
    delete holey[1];
    expect(violationsOf(withChange((s) => (s.dataset.train = holey)))).toEqual([
      { field: 'dataset.train[1]', reason: 'must be JSON data (got an empty slot)' },
    ]);
  });

  it('job spec - a value JSON cannot carry in an unknown field is both', () => {
    expect(violationsOf(withChange((s) => (s.training.startAt = new Date(0))))).toEqual([
      { field: 'training.startAt', reason: 'must be JSON data (got a Date)' },
      { field: 'training.startAt', reason: expect.stringMatching(/^unknown field/) },
    ]);
  });

  it('job spec - undefined properties count as absent, as in JSON', () => {
    const spec = validateJobSpec(withChange((s) => (s.trainers = { min: 2, max: undefined })));
    expect(spec.trainers).toEqual({ min: 2, max: 64 });
  });

  it('job spec - an object used twice is two objects, as in JSON', () => {
    const shared = {};
    const spec = validateJobSpec(withChange((s) => Object.assign(s, { trainers: shared, pservers: shared })));
    expect(spec.trainers).toEqual({ min: 1, max: 64 });
    expect(spec.pservers).toEqual({ count: 1 });
    expect(shared).toEqual({});
  });

  it('job spec - a __proto__ key is an unknown field, not a prototype', () => {
    const input = JSON.parse('{"__proto__": {"polluted": true}}') as Record<string, unknown>;
    Object.assign(input, minimalSpec());
    expect(violationsOf(input)).toEqual([{ field: '__proto__', reason: expect.stringMatching(/^unknown field/) }]);
    expect(({} as Record<string, unknown>)['polluted']).toBeUndefined();
  });
});
