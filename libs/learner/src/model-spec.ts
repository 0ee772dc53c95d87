/**
 * The parts of a job spec that a learner needs: the model and the record layout. These shapes
 * are structurally compatible with the job spec library's types, so a parsed job spec can be
 * passed in as is.
 */

/** Activation functions accepted by the preset models. */
export type Activation = 'relu' | 'tanh' | 'sigmoid' | 'elu';

/** A multilayer perceptron: Dense hidden layers, each optionally followed by dropout. */
export interface MlpModelSpec {
  preset: 'mlp';
  /** Units of each hidden Dense layer, input side first. */
  hiddenUnits: number[];
  activation: Activation;
  /** Dropout rate after each hidden layer, in [0, 1); 0 disables dropout. */
  dropout: number;
}

/** A small convolutional net: per entry of `filters`, a same-padded conv2d and a 2x2 max pool. */
export interface CnnModelSpec {
  preset: 'cnn';
  /** Filters of each conv2d block, input side first. */
  filters: number[];
  /** Square kernel size of every conv2d. */
  kernelSize: number;
  /** Units of the Dense layer between the flattened features and the output. */
  denseUnits: number;
  activation: Activation;
}

/**
 * A model given by its Keras-style topology: the JSON of `model.toJSON(null, false)`, or an
 * object with a `modelTopology` field holding it (the `model.json` format). Weights are ignored.
 */
export interface TopologyModelSpec {
  topology: Record<string, unknown>;
}

/** How the model is described in a job spec. */
export type ModelSpec = MlpModelSpec | CnnModelSpec | TopologyModelSpec;

/** Element type of the features stored in a record. */
export type FeatureDtype = 'uint8' | 'float32';

/** Element type of the label stored in a record. */
export type LabelDtype = 'int32' | 'float32';

/** How an example is laid out in a record, and what it means. */
export interface RecordLayout {
  /** Shape of one example's features, without the batch dimension (e.g. `[28, 28, 1]`). */
  featureShape: number[];
  featureDtype: FeatureDtype;
  /** Factor applied to every feature when decoding (e.g. `1 / 255` for bytes). */
  scale: number;
  labelDtype: LabelDtype;
  /** Present for classification (labels are class indices); absent for regression. */
  numClasses?: number;
}

/** Everything a learner needs to build its model. */
export interface LearnerSpec {
  model: ModelSpec;
  layout: RecordLayout;
  /** Seed for weight initialisation; with a seed, two learners start from identical weights. */
  seed?: number;
}

/** True when the spec describes a preset model rather than a topology. */
export function isPresetModel(model: ModelSpec): model is MlpModelSpec | CnnModelSpec {
  return 'preset' in model;
}
