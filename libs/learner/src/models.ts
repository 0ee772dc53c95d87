import * as tf from '@tensorflow/tfjs';
import { ModelSpecError } from './errors.js';
import {
  isPresetModel,
  type Activation,
  type CnnModelSpec,
  type LearnerSpec,
  type MlpModelSpec,
  type RecordLayout,
  type TopologyModelSpec,
} from './model-spec.js';

// Production mode: no debug checks, and no console advice to install tfjs-node on every start
// (the backend Tributary picks is logged instead).
tf.env().set('PROD', true);

/** Activations the presets accept. */
export const PRESET_ACTIVATIONS: readonly Activation[] = ['relu', 'tanh', 'sigmoid', 'elu'];

/** Name of the preset layer that produces the logits (classification) or the prediction. */
export const OUTPUT_LAYER_NAME = 'output';

/** Name of the softmax layer that ends a classification preset. */
export const PROBABILITIES_LAYER_NAME = 'probabilities';

/** Initializer class names (Keras and TF.js spellings) that draw random numbers and take a seed. */
const RANDOM_INITIALIZERS = new Set([
  'RandomNormal',
  'RandomUniform',
  'TruncatedNormal',
  'VarianceScaling',
  'GlorotUniform',
  'GlorotNormal',
  'HeNormal',
  'HeUniform',
  'LeCunNormal',
  'LeCunUniform',
  'Orthogonal',
]);

/**
 * Builds the model a learner spec describes. Presets are Sequential models with fixed layer
 * names; with `spec.seed`, each weighted layer draws its kernel from Glorot-uniform seeded with
 * `seed + layerIndex`, so equal specs give equal weights. A topology is rebuilt with
 * `tf.models.modelFromJSON`; with a seed, every random initializer in it is seeded the same way.
 * Classification ends in Dense(numClasses) + softmax, regression in Dense(1).
 *
 * @throws ModelSpecError when the spec is inconsistent with itself or with the record layout.
 */
export async function buildModel(spec: LearnerSpec): Promise<tf.LayersModel> {
  validateLayout(spec.layout);
  if (isPresetModel(spec.model)) {
    return spec.model.preset === 'mlp'
      ? buildMlp(spec.model, spec.layout, spec.seed)
      : buildCnn(spec.model, spec.layout, spec.seed);
  }
  return buildFromTopology(spec.model, spec.layout, spec.seed);
}

function validateLayout(layout: RecordLayout): void {
  if (layout.featureShape.length === 0 || !layout.featureShape.every((d) => Number.isInteger(d) && d > 0)) {
    throw new ModelSpecError(`layout.featureShape [${layout.featureShape.join(', ')}] must be positive integers`);
  }
  if (layout.numClasses !== undefined && !(Number.isInteger(layout.numClasses) && layout.numClasses >= 2)) {
    throw new ModelSpecError(`layout.numClasses ${layout.numClasses} must be an integer >= 2`);
  }
}

function validateActivation(activation: string, field: string): void {
  if (!(PRESET_ACTIVATIONS as readonly string[]).includes(activation)) {
    throw new ModelSpecError(`${field} '${activation}' is not one of ${PRESET_ACTIVATIONS.join(', ')}`);
  }
}

function validateUnits(units: readonly number[], field: string): void {
  units.forEach((u, i) => {
    if (!Number.isInteger(u) || u <= 0) throw new ModelSpecError(`${field}[${i}] = ${u} must be a positive integer`);
  });
}

/** Seeded Glorot-uniform for the n-th weighted layer, or the layer default without a seed. */
function kernelInit(seed: number | undefined, n: number): ReturnType<typeof tf.initializers.glorotUniform> | undefined {
  return seed === undefined ? undefined : tf.initializers.glorotUniform({ seed: seed + n });
}

function addOutput(model: tf.Sequential, layout: RecordLayout, seed: number | undefined, n: number): void {
  const units = layout.numClasses ?? 1;
  model.add(tf.layers.dense({ units, name: OUTPUT_LAYER_NAME, kernelInitializer: kernelInit(seed, n) }));
  if (layout.numClasses !== undefined) {
    model.add(tf.layers.activation({ activation: 'softmax', name: PROBABILITIES_LAYER_NAME }));
  }
}

function buildMlp(spec: MlpModelSpec, layout: RecordLayout, seed: number | undefined): tf.LayersModel {
  validateActivation(spec.activation, 'model.activation');
  validateUnits(spec.hiddenUnits, 'model.hiddenUnits');
  if (!(spec.dropout >= 0 && spec.dropout < 1)) {
    throw new ModelSpecError(`model.dropout ${spec.dropout} must be in [0, 1)`);
  }
  const model = tf.sequential();
  const inputShape = layout.featureShape;
  let needsInputShape = true;
  if (inputShape.length > 1) {
    model.add(tf.layers.flatten({ inputShape, name: 'flatten' }));
    needsInputShape = false;
  }
  spec.hiddenUnits.forEach((units, i) => {
    model.add(
      tf.layers.dense({
        units,
        activation: spec.activation,
        name: `hidden_${i}`,
        kernelInitializer: kernelInit(seed, i),
        ...(needsInputShape ? { inputShape } : {}),
      }),
    );
    needsInputShape = false;
    if (spec.dropout > 0) {
      // No seed here: a seeded Dropout draws the same mask at every step.
      model.add(tf.layers.dropout({ rate: spec.dropout, name: `dropout_${i}` }));
    }
  });
  if (needsInputShape) {
    model.add(tf.layers.inputLayer({ inputShape, name: 'input' }));
  }
  addOutput(model, layout, seed, spec.hiddenUnits.length);
  return model;
}

function buildCnn(spec: CnnModelSpec, layout: RecordLayout, seed: number | undefined): tf.LayersModel {
  validateActivation(spec.activation, 'model.activation');
  validateUnits(spec.filters, 'model.filters');
  validateUnits([spec.kernelSize, spec.denseUnits], 'model.[kernelSize, denseUnits]');
  const shape = layout.featureShape;
  if (shape.length !== 2 && shape.length !== 3) {
    throw new ModelSpecError(
      `the cnn preset needs layout.featureShape [height, width] or [height, width, channels], got [${shape.join(', ')}]`,
    );
  }
  const model = tf.sequential();
  let [height, width] = shape as [number, number];
  if (shape.length === 2) {
    model.add(tf.layers.reshape({ targetShape: [height, width, 1], inputShape: shape, name: 'channels' }));
  }
  spec.filters.forEach((filters, i) => {
    model.add(
      tf.layers.conv2d({
        filters,
        kernelSize: spec.kernelSize,
        padding: 'same',
        activation: spec.activation,
        name: `conv_${i}`,
        kernelInitializer: kernelInit(seed, i),
        ...(i === 0 && shape.length === 3 ? { inputShape: shape } : {}),
      }),
    );
    height = Math.floor(height / 2);
    width = Math.floor(width / 2);
    if (height < 1 || width < 1) {
      throw new ModelSpecError(
        `model.filters has ${spec.filters.length} conv blocks but a ${shape[0]}x${shape[1]} input allows only ${i} 2x2 poolings`,
      );
    }
    model.add(tf.layers.maxPooling2d({ poolSize: 2, name: `pool_${i}` }));
  });
  model.add(
    tf.layers.flatten({
      name: 'flatten',
      ...(spec.filters.length === 0 && shape.length === 3 ? { inputShape: shape } : {}),
    }),
  );
  model.add(
    tf.layers.dense({
      units: spec.denseUnits,
      activation: spec.activation,
      name: 'dense',
      kernelInitializer: kernelInit(seed, spec.filters.length),
    }),
  );
  addOutput(model, layout, seed, spec.filters.length + 1);
  return model;
}

/** The Keras-style topology inside a topology spec, whichever of the two accepted forms it has. */
function topologyOf(spec: TopologyModelSpec): Record<string, unknown> {
  const t = spec.topology;
  if (t === null || typeof t !== 'object') throw new ModelSpecError('model.topology must be an object');
  const inner = (t as { modelTopology?: unknown }).modelTopology;
  if (inner !== undefined) {
    if (inner === null || typeof inner !== 'object') {
      throw new ModelSpecError('model.topology.modelTopology must be an object');
    }
    return inner as Record<string, unknown>;
  }
  return t;
}

/**
 * A deep copy of `topology` with `seed + n` in the config of the n-th random initializer, in
 * document order, so that the same topology and seed always initialise the same weights.
 */
export function seedTopology(topology: Record<string, unknown>, seed: number): Record<string, unknown> {
  const copy = JSON.parse(JSON.stringify(topology)) as Record<string, unknown>;
  let n = 0;
  const visit = (node: unknown): void => {
    if (Array.isArray(node)) {
      node.forEach(visit);
      return;
    }
    if (node === null || typeof node !== 'object') return;
    const record = node as Record<string, unknown>;
    const config = record['config'];
    if (
      typeof record['class_name'] === 'string' &&
      RANDOM_INITIALIZERS.has(record['class_name']) &&
      config !== null &&
      typeof config === 'object'
    ) {
      (config as Record<string, unknown>)['seed'] = seed + n++;
    }
    for (const key of Object.keys(record)) visit(record[key]);
  };
  visit(copy);
  return copy;
}

async function buildFromTopology(
  spec: TopologyModelSpec,
  layout: RecordLayout,
  seed: number | undefined,
): Promise<tf.LayersModel> {
  let topology = topologyOf(spec);
  if (seed !== undefined) topology = seedTopology(topology, seed);
  let model: tf.LayersModel;
  try {
    model = await tf.models.modelFromJSON({ modelTopology: topology } as tf.io.ModelJSON);
  } catch (cause) {
    throw new ModelSpecError(`model.topology cannot be deserialised: ${(cause as Error).message}`, { cause });
  }
  try {
    checkTopologyAgainstLayout(model, layout);
  } catch (error) {
    model.dispose();
    throw error;
  }
  return model;
}

function checkTopologyAgainstLayout(model: tf.LayersModel, layout: RecordLayout): void {
  if (model.inputs.length !== 1 || model.outputs.length !== 1) {
    throw new ModelSpecError(
      `model.topology must have one input and one output, has ${model.inputs.length} and ${model.outputs.length}`,
    );
  }
  const inputShape = model.inputs[0]!.shape.slice(1);
  const featureCount = layout.featureShape.reduce((a, b) => a * b, 1);
  const known = inputShape.every((d) => d !== null);
  if (known && (inputShape as number[]).reduce((a, b) => a * b, 1) !== featureCount) {
    throw new ModelSpecError(
      `model.topology input shape ${formatShape(inputShape)} does not hold layout.featureShape [${layout.featureShape.join(', ')}]`,
    );
  }
  if (!known && inputShape.length !== layout.featureShape.length) {
    throw new ModelSpecError(
      `model.topology input shape ${formatShape(inputShape)} has another rank than layout.featureShape [${layout.featureShape.join(', ')}]`,
    );
  }
  const outputShape = model.outputs[0]!.shape;
  const expected = layout.numClasses ?? 1;
  if (outputShape.length !== 2 || outputShape[1] !== expected) {
    throw new ModelSpecError(
      `model.topology output shape ${formatShape(outputShape)} must be [null, ${expected}] for ${layout.numClasses !== undefined ? `${expected} classes` : 'regression'}`,
    );
  }
}

/** A shape as text, with `null` for a free dimension: `[null, 10]`. */
function formatShape(shape: readonly (number | null)[]): string {
  return `[${shape.map((d) => (d === null ? 'null' : String(d))).join(', ')}]`;
}

/**
 * The per-example input shape the model is fed with: the model's own input shape when it is
 * fully known (so `[784]` records can feed a `[28, 28, 1]` input), else the layout's.
 */
export function modelInputShape(model: tf.LayersModel, layout: RecordLayout): number[] {
  const shape = model.inputs[0]!.shape.slice(1);
  return shape.every((d) => d !== null) ? (shape as number[]) : layout.featureShape;
}
