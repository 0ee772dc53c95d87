import * as tf from '@tensorflow/tfjs';
import { modelParameterCount, type CnnModelSpec, type MlpModelSpec } from '#libs/job-spec';
import { ModelSpecError } from './errors.js';
import type { LearnerSpec, RecordLayout } from './model-spec.js';
import { buildModel, seedTopology } from './models.js';

const IMAGE_LAYOUT: RecordLayout = {
  featureShape: [28, 28, 1],
  featureDtype: 'uint8',
  scale: 1 / 255,
  labelDtype: 'int32',
  numClasses: 10,
};

function layerSummary(model: tf.LayersModel): string[] {
  return model.layers.map((l) => `${l.getClassName()}:${l.name}:${JSON.stringify(l.outputShape)}`);
}

describe('models', () => {
  beforeAll(async () => {
    await tf.setBackend('cpu');
  });

  it('models - the parameter count the master checks before building matches the built presets', async () => {
    const specs: (MlpModelSpec | CnnModelSpec)[] = [
      { preset: 'mlp', hiddenUnits: [128, 64], activation: 'relu', dropout: 0.2 },
      { preset: 'cnn', filters: [8, 16], kernelSize: 3, denseUnits: 32, activation: 'relu' },
      { preset: 'cnn', filters: [4, 4, 4], kernelSize: 5, denseUnits: 7, activation: 'tanh' },
    ];
    for (const model of specs) {
      const built = await buildModel({ model, layout: IMAGE_LAYOUT });
      expect(modelParameterCount(model, IMAGE_LAYOUT)).toBe(built.countParams());
      built.dispose();
    }
  });

  it('models - the mlp preset flattens, stacks hidden layers with dropout and ends in softmax', async () => {
    const model = await buildModel({
      model: { preset: 'mlp', hiddenUnits: [128, 64], activation: 'relu', dropout: 0.2 },
      layout: IMAGE_LAYOUT,
    });
    expect(layerSummary(model)).toEqual([
      'Flatten:flatten:[null,784]',
      'Dense:hidden_0:[null,128]',
      'Dropout:dropout_0:[null,128]',
      'Dense:hidden_1:[null,64]',
      'Dropout:dropout_1:[null,64]',
      'Dense:output:[null,10]',
      'Activation:probabilities:[null,10]',
    ]);
    expect(model.countParams()).toBe(784 * 128 + 128 + 128 * 64 + 64 + 64 * 10 + 10);
    model.dispose();
  });

  it('models - the mlp preset on flat features has no flatten and regression ends in one unit', async () => {
    const model = await buildModel({
      model: { preset: 'mlp', hiddenUnits: [4], activation: 'sigmoid', dropout: 0 },
      layout: { featureShape: [3], featureDtype: 'float32', scale: 1, labelDtype: 'float32' },
    });
    expect(layerSummary(model)).toEqual(['Dense:hidden_0:[null,4]', 'Dense:output:[null,1]']);
    model.dispose();
  });

  it('models - the cnn preset stacks conv and pooling blocks', async () => {
    const model = await buildModel({
      model: { preset: 'cnn', filters: [8, 16], kernelSize: 3, denseUnits: 32, activation: 'relu' },
      layout: IMAGE_LAYOUT,
    });
    expect(layerSummary(model)).toEqual([
      'Conv2D:conv_0:[null,28,28,8]',
      'MaxPooling2D:pool_0:[null,14,14,8]',
      'Conv2D:conv_1:[null,14,14,16]',
      'MaxPooling2D:pool_1:[null,7,7,16]',
      'Flatten:flatten:[null,784]',
      'Dense:dense:[null,32]',
      'Dense:output:[null,10]',
      'Activation:probabilities:[null,10]',
    ]);
    model.dispose();
  });

  it('models - the cnn preset adds a channel axis to 2-D features', async () => {
    const model = await buildModel({
      model: { preset: 'cnn', filters: [2], kernelSize: 3, denseUnits: 4, activation: 'tanh' },
      layout: { ...IMAGE_LAYOUT, featureShape: [6, 6] },
    });
    expect(layerSummary(model)[0]).toBe('Reshape:channels:[null,6,6,1]');
    model.dispose();
  });

  it('models - inconsistent specs are refused with the field named', async () => {
    const cases: [LearnerSpec, RegExp][] = [
      [
        { model: { preset: 'mlp', hiddenUnits: [0], activation: 'relu', dropout: 0 }, layout: IMAGE_LAYOUT },
        /model.hiddenUnits\[0\] = 0/,
      ],
      [
        { model: { preset: 'mlp', hiddenUnits: [3], activation: 'gelu' as 'relu', dropout: 0 }, layout: IMAGE_LAYOUT },
        /model.activation 'gelu'/,
      ],
      [
        { model: { preset: 'mlp', hiddenUnits: [3], activation: 'relu', dropout: 1 }, layout: IMAGE_LAYOUT },
        /model.dropout 1/,
      ],
      [
        {
          model: { preset: 'cnn', filters: [2], kernelSize: 3, denseUnits: 4, activation: 'relu' },
          layout: { ...IMAGE_LAYOUT, featureShape: [784] },
        },
        /cnn preset needs layout.featureShape/,
      ],
      [
        {
          model: { preset: 'cnn', filters: [2, 2, 2], kernelSize: 3, denseUnits: 4, activation: 'relu' },
          layout: { ...IMAGE_LAYOUT, featureShape: [4, 4, 1] },
        },
        /allows only 2 2x2 poolings/,
      ],
      [
        {
          model: { preset: 'mlp', hiddenUnits: [3], activation: 'relu', dropout: 0 },
          layout: { ...IMAGE_LAYOUT, numClasses: 1 },
        },
        /numClasses 1/,
      ],
      [{ model: { topology: { class_name: 'Nonsense', config: {} } }, layout: IMAGE_LAYOUT }, /cannot be deserialised/],
    ];
    for (const [spec, message] of cases) {
      await expect(buildModel(spec)).rejects.toThrow(ModelSpecError);
      await expect(buildModel(spec)).rejects.toThrow(message);
    }
  });

  it('models - a topology must fit the layout', async () => {
    const source = tf.sequential({ layers: [tf.layers.dense({ inputShape: [10], units: 3 })] });
    const topology = source.toJSON(null, false) as Record<string, unknown>;
    source.dispose();
    await expect(buildModel({ model: { topology }, layout: IMAGE_LAYOUT })).rejects.toThrow(
      /input shape \[10\] does not hold/,
    );
    await expect(buildModel({ model: { topology }, layout: { ...IMAGE_LAYOUT, featureShape: [10] } })).rejects.toThrow(
      /output shape \[null, 3\] must be \[null, 10\]/,
    );
    const model = await buildModel({
      model: { topology },
      layout: { ...IMAGE_LAYOUT, featureShape: [2, 5], numClasses: 3 },
    });
    expect(model.outputs[0]!.shape).toEqual([null, 3]);
    model.dispose();
  });

  it('models - seeding a topology seeds every random initializer in document order', () => {
    const topology = {
      class_name: 'Sequential',
      config: {
        layers: [
          {
            class_name: 'Dense',
            config: {
              kernel_initializer: { class_name: 'GlorotUniform', config: { seed: null } },
              bias_initializer: { class_name: 'Zeros', config: {} },
            },
          },
          {
            class_name: 'Dense',
            config: { kernel_initializer: { class_name: 'VarianceScaling', config: { seed: null, scale: 1 } } },
          },
        ],
      },
    };
    const seeded = seedTopology(topology, 100) as typeof topology;
    expect(seeded.config.layers[0]!.config.kernel_initializer.config.seed).toBe(100);
    expect(seeded.config.layers[0]!.config.bias_initializer).toEqual({ class_name: 'Zeros', config: {} });
    expect(seeded.config.layers[1]!.config.kernel_initializer.config.seed).toBe(101);
    expect(topology.config.layers[0]!.config.kernel_initializer.config.seed).toBeNull();
  });
});
