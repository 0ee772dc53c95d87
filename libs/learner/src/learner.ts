import * as tf from '@tensorflow/tfjs';
import { DenseStack } from './dense-stack.js';
import { InvalidBatchError, LearnerStateError, ParamMismatchError } from './errors.js';
import { createLossHead, type LossHead } from './loss-head.js';
import type { LearnerSpec, RecordLayout } from './model-spec.js';
import { ByteFeatureTensors } from './byte-feature-tensors.js';
import { buildModel, modelInputShape } from './models.js';
import { namedTrainableVariables, type NamedVariable } from './param-names.js';
import type { LocalOptimizer } from './local-optimizer.js';

/** Element types a {@link PlainTensor} may carry. */
export type PlainTensorDtype = 'float32' | 'int32' | 'bool';

/**
 * A tensor as plain data, ready for the wire: a canonical name, a dtype, a shape and a
 * row-major typed array (`bool` as `Uint8Array`).
 */
export interface PlainTensor {
  name: string;
  dtype: PlainTensorDtype;
  shape: number[];
  data: Float32Array | Int32Array | Uint8Array;
}

/**
 * A minibatch: `size` examples, features row-major (`size * prod(featureShape)` values, already
 * scaled) and one label per example (class indices for classification).
 */
export interface Batch {
  /** The features as float32, scaled; empty when {@link featureBytes} holds them instead. */
  features: Float32Array;
  /**
   * Optional, for a layout of uint8 features: the features as the records hold them, row-major,
   * not yet converted nor scaled, in place of `features`. Only a learner that says it reads them
   * (`Learner.readsByteFeatures`) is handed such a minibatch; it converts them itself, to the
   * values `FeatureWriter` gives (`bytes[i] * layout.scale`, rounded to float32).
   */
  featureBytes?: Uint8Array;
  labels: Float32Array | Int32Array;
  size: number;
}

/** Outcome of one `train` call: the mean loss over the batch, before any update. */
export interface TrainResult {
  loss: number;
  samples: number;
}

/** Outcome of `evaluate`: summed per-example loss and the count of correct predictions. */
export interface EvaluationResult {
  lossSum: number;
  /** Examples whose arg-max prediction equals the label; 0 for regression. */
  correct: number;
  samples: number;
}

/**
 * Anything that trains a model on minibatches, driven by a trainer. Parameters cross the
 * boundary as {@link PlainTensor}s in a fixed order with canonical names, so a learner written
 * in another library or language can be plugged in.
 */
export interface Learner {
  /** Builds the model from the spec; a second call replaces the first model. */
  initialize(spec: LearnerSpec): Promise<void>;
  /** The current parameters in the fixed order (used by the trainer that initialises the pservers). */
  getParams(): Promise<PlainTensor[]>;
  /** Loads the current parameters (all of them) and starts a new update. */
  setParams(params: PlainTensor[]): void;
  /** Trains on one minibatch. */
  train(batch: Batch): Promise<TrainResult>;
  /**
   * The update since the last `setParams` or `getUpdate`: the gradient of the mean loss over
   * every example trained on, or the parameter delta after local steps. Same names and order
   * as `getParams`. Asynchronous because the webgpu backend can only read results back
   * asynchronously under Node.
   */
  getUpdate(): Promise<PlainTensor[]>;
  /**
   * Optional: `train` then `getUpdate` as one call, for a learner to which each call costs a
   * round trip (one on a thread of its own). The trainer uses it where an update is one minibatch.
   */
  trainForUpdate?(batch: Batch): Promise<{ result: TrainResult; update: PlainTensor[] }>;
  /** Scores a minibatch without training on it. */
  evaluate(batch: Batch): Promise<EvaluationResult>;
  /**
   * Optional: true when `train` and `evaluate` take minibatches whose uint8 features come as
   * bytes (`Batch.featureBytes`): the trainer's reader then leaves their conversion to the learner.
   */
  readonly readsByteFeatures?: boolean;
  /** Releases the model and every tensor the learner holds. */
  shutdown(): void;
}

/**
 * How a {@link TfjsLearner} turns several `train` calls into one update: `gradient` averages the
 * gradients (weighted by examples) at the parameters last set, `delta` takes a local SGD step
 * per call and returns `params_now - params_at_start`.
 */
export type UpdateMode = 'gradient' | 'delta';

/** Learning rate of the local SGD steps in `delta` mode when none is given. */
export const DEFAULT_LOCAL_LEARNING_RATE = 0.01;

/**
 * Backends whose `data()` hands out a fresh copy of the tensor's memory, never an array shared
 * with the tensor: wasm copies out of its heap. The cpu backend returns the tensor's own array,
 * and webgpu caches the array it read back on the tensor, which views of it (a reshape) share.
 */
const COPYING_BACKENDS = new Set(['wasm']);

/** The tensors' values, each in an array the caller owns. */
async function ownedFloat32(tensors: tf.Tensor[]): Promise<Float32Array[]> {
  // Read asynchronously: the webgpu backend cannot read synchronously under Node (its
  // `dataSync` path draws through an OffscreenCanvas, which Node lacks).
  const copying = COPYING_BACKENDS.has(tf.getBackend());
  const values = await Promise.all(tensors.map((t) => t.data() as Promise<Float32Array>));
  return copying ? values : values.map((v) => new Float32Array(v));
}

/** Options of a {@link TfjsLearner}. */
export interface TfjsLearnerOptions {
  /** Defaults to `gradient`. */
  mode?: UpdateMode;
  /** Step size of local SGD in `delta` mode; defaults to {@link DEFAULT_LOCAL_LEARNING_RATE}. */
  localLearningRate?: number;
  /**
   * `delta` mode: makes the optimizer of the local steps (see `localOptimizerFor`), once per
   * model the learner builds; absent or giving undefined, plain SGD at `localLearningRate`.
   */
  localOptimizer?: () => LocalOptimizer | undefined;
}

interface Built {
  model: tf.LayersModel;
  head: LossHead;
  params: NamedVariable[];
  inputShape: number[];
  layout: RecordLayout;
  /** `delta` mode: the optimizer of the local steps; undefined for plain SGD. */
  localOptimizer: LocalOptimizer | undefined;
  /** Set when the model is a chain of Dense layers, whose gradients are taken by hand. */
  denseStack: DenseStack | undefined;
}

/**
 * The TensorFlow.js learner. It trains on whichever backend is active (see `selectBackend`),
 * and holds no tensors beyond the model, the pending update and, in `delta` mode, the
 * parameters the update is measured from.
 *
 * `getUpdate` is idempotent until the next `train`: a second call returns the same arrays, so
 * a trainer may retry a push without recomputing, and a `train` after it starts a new update.
 */
export class TfjsLearner implements Learner {
  private built: Built | undefined;
  private readonly mode: UpdateMode;
  private readonly localLearningRate: number;
  private readonly makeLocalOptimizer: (() => LocalOptimizer | undefined) | undefined;
  /** gradient mode: the example-weighted mean gradient since the update started. */
  private meanGradients: tf.Tensor[] | undefined;
  /** delta mode: the parameters when the update started. */
  private startParams: tf.Tensor[] | undefined;
  private samplesInUpdate = 0;
  /** The update `getUpdate` handed out last, until the next `train` starts a new one. */
  private lastUpdate: Promise<PlainTensor[]> | undefined;
  /** Turns minibatches' feature bytes into input tensors. */
  private readonly byteFeatures = new ByteFeatureTensors();
  /** Minibatches may bring uint8 features as bytes (`Batch.featureBytes`), on every backend. */
  readonly readsByteFeatures = true;

  constructor(options: TfjsLearnerOptions = {}) {
    this.mode = options.mode ?? 'gradient';
    this.localLearningRate = options.localLearningRate ?? DEFAULT_LOCAL_LEARNING_RATE;
    this.makeLocalOptimizer = options.localOptimizer;
    if (!(this.localLearningRate > 0)) {
      throw new RangeError(`localLearningRate ${this.localLearningRate} must be positive`);
    }
  }

  /** The full model (ending in softmax for classification), for prediction and export. */
  get model(): tf.LayersModel {
    return this.require().model;
  }

  /** Canonical names of the parameters, in the fixed order. */
  get paramNames(): string[] {
    return this.require().params.map((p) => p.name);
  }

  async initialize(spec: LearnerSpec): Promise<void> {
    this.shutdown();
    const model = await buildModel(spec);
    const head = createLossHead(model, spec.layout);
    const params = namedTrainableVariables(model);
    this.built = {
      model,
      head,
      params,
      inputShape: modelInputShape(model, spec.layout),
      layout: spec.layout,
      localOptimizer: this.mode === 'delta' ? this.makeLocalOptimizer?.() : undefined,
      denseStack: DenseStack.of(head, params, spec.layout.numClasses),
    };
    this.startUpdate();
  }

  async getParams(): Promise<PlainTensor[]> {
    const { params } = this.require();
    return Promise.all(
      params.map(async ({ name, variable }) => ({
        name,
        dtype: 'float32' as const,
        shape: [...variable.shape],
        data: new Float32Array((await variable.data()) as Float32Array),
      })),
    );
  }

  setParams(params: PlainTensor[]): void {
    const built = this.require();
    const byName = new Map(params.map((p) => [p.name, p]));
    if (byName.size !== params.length) {
      throw new ParamMismatchError(`setParams got ${params.length} tensors but only ${byName.size} distinct names`);
    }
    for (const { name, variable } of built.params) {
      const p = byName.get(name);
      if (p === undefined) throw new ParamMismatchError(`setParams is missing parameter '${name}'`);
      const expected = variable.shape;
      if (p.shape.length !== expected.length || p.shape.some((d, i) => d !== expected[i])) {
        throw new ParamMismatchError(
          `parameter '${name}' has shape [${p.shape.join(', ')}], expected [${expected.join(', ')}]`,
        );
      }
      if (p.dtype !== variable.dtype) {
        throw new ParamMismatchError(`parameter '${name}' has dtype ${p.dtype}, expected ${variable.dtype}`);
      }
      const size = expected.reduce((a, b) => a * b, 1);
      if (p.data.length !== size) {
        throw new ParamMismatchError(`parameter '${name}' has ${p.data.length} values, expected ${size}`);
      }
      byName.delete(name);
    }
    if (byName.size > 0) {
      throw new ParamMismatchError(`setParams got unknown parameters: ${[...byName.keys()].join(', ')}`);
    }
    const lookup = new Map(params.map((p) => [p.name, p]));
    tf.tidy(() => {
      for (const { name, variable } of built.params) {
        const p = lookup.get(name)!;
        variable.assign(tf.tensor(p.data, p.shape, p.dtype));
      }
    });
    this.startUpdate();
  }

  async train(batch: Batch): Promise<TrainResult> {
    const built = this.require();
    this.checkBatch(batch, built);
    const vars = built.params.map((p) => p.variable);
    const { value, grads } = tf.tidy(() => {
      const x = this.featuresTensor(batch, built);
      const y = this.labelsTensor(batch, built);
      if (built.denseStack?.usable) return built.denseStack.lossAndGradients(x, y);
      const result = tf.variableGrads(() => {
        const outputs = built.head.lossModel.apply(x, { training: true }) as tf.Tensor;
        return built.head.meanLoss(outputs, y);
      }, vars);
      return { value: result.value, grads: vars.map((v) => result.grads[v.name] ?? tf.zerosLike(v)) };
    });
    if (this.samplesInUpdate === 0) this.lastUpdate = undefined;
    if (this.mode === 'gradient') {
      this.accumulateGradients(grads, batch.size);
    } else {
      const optimizer = built.localOptimizer;
      tf.tidy(() => {
        if (optimizer) optimizer.applyGradients(vars, grads);
        else vars.forEach((v, i) => v.assign(tf.sub(v, tf.mul(grads[i]!, this.localLearningRate))));
      });
      tf.dispose(grads);
    }
    this.samplesInUpdate += batch.size;
    const loss = (await value.data())[0]!;
    value.dispose();
    return { loss, samples: batch.size };
  }

  async getUpdate(): Promise<PlainTensor[]> {
    const built = this.require();
    if (this.samplesInUpdate === 0) {
      if (this.lastUpdate !== undefined) return this.lastUpdate;
      throw new LearnerStateError('getUpdate called with no train call since setParams');
    }
    let sources: tf.Tensor[];
    if (this.mode === 'gradient') {
      // Taken over from the running mean, so that `startUpdate` below leaves them alive.
      sources = this.meanGradients!;
      this.meanGradients = undefined;
    } else {
      sources = tf.tidy(() => built.params.map(({ variable }, i) => tf.sub(variable, this.startParams![i]!)));
    }
    // The next update starts now, before the read-back: the parameters it is measured from
    // are those of this moment.
    this.startUpdate();
    const update = ownedFloat32(sources)
      .then((values) =>
        built.params.map(({ name, variable }, i) => ({
          name,
          dtype: 'float32' as const,
          shape: [...variable.shape],
          data: values[i]!,
        })),
      )
      .finally(() => tf.dispose(sources));
    this.lastUpdate = update;
    return update;
  }

  async evaluate(batch: Batch): Promise<EvaluationResult> {
    const built = this.require();
    this.checkBatch(batch, built);
    const [lossSum, correct] = tf.tidy(() => {
      const x = this.featuresTensor(batch, built);
      const y = this.labelsTensor(batch, built);
      const outputs = built.head.lossModel.apply(x, { training: false }) as tf.Tensor;
      return [tf.sum(built.head.perExampleLoss(outputs, y)), built.head.correctCount(outputs, y)];
    });
    const [lossValue, correctValue] = await Promise.all([lossSum.data(), correct.data()]);
    tf.dispose([lossSum, correct]);
    return { lossSum: lossValue[0]!, correct: correctValue[0]!, samples: batch.size };
  }

  shutdown(): void {
    this.clearUpdate();
    this.lastUpdate = undefined;
    if (this.built !== undefined) {
      this.built.head.dispose();
      this.built.model.dispose();
      this.built.localOptimizer?.dispose();
      this.built = undefined;
    }
  }

  private require(): Built {
    if (this.built === undefined)
      throw new LearnerStateError('the learner is not initialised; call initialize(spec) first');
    return this.built;
  }

  private clearUpdate(): void {
    if (this.meanGradients !== undefined) tf.dispose(this.meanGradients);
    if (this.startParams !== undefined) tf.dispose(this.startParams);
    this.meanGradients = undefined;
    this.startParams = undefined;
    this.samplesInUpdate = 0;
  }

  /** Drops the pending update and, in delta mode, remembers the current parameters. */
  private startUpdate(): void {
    this.clearUpdate();
    this.lastUpdate = undefined;
    if (this.mode === 'delta' && this.built !== undefined) {
      this.startParams = this.built.params.map((p) => tf.keep(p.variable.clone()));
    }
  }

  /** Folds a batch's mean gradients into the running example-weighted mean; takes ownership. */
  private accumulateGradients(grads: tf.Tensor[], samples: number): void {
    if (this.meanGradients === undefined) {
      this.meanGradients = grads;
      return;
    }
    const weight = samples / (this.samplesInUpdate + samples);
    const previous = this.meanGradients;
    this.meanGradients = tf.tidy(() => previous.map((m, i) => tf.add(m, tf.mul(tf.sub(grads[i]!, m), weight))));
    tf.dispose(previous);
    tf.dispose(grads);
  }

  private checkBatch(batch: Batch, built: Built): void {
    const perExample = built.inputShape.reduce((a, b) => a * b, 1);
    if (!Number.isInteger(batch.size) || batch.size < 1) {
      throw new InvalidBatchError(`batch size ${batch.size} must be a positive integer`);
    }
    const bytes = batch.featureBytes;
    if (bytes !== undefined && built.layout.featureDtype !== 'uint8') {
      throw new InvalidBatchError(`batch has its features as bytes, but the layout's are ${built.layout.featureDtype}`);
    }
    const values = bytes ?? batch.features;
    if (values.length !== batch.size * perExample) {
      throw new InvalidBatchError(
        `batch has ${values.length} feature ${bytes ? 'bytes' : 'values'}, expected ${batch.size} x ${perExample} for shape [${built.inputShape.join(', ')}]`,
      );
    }
    if (batch.labels.length !== batch.size) {
      throw new InvalidBatchError(`batch has ${batch.labels.length} labels, expected ${batch.size}`);
    }
    const numClasses = built.layout.numClasses;
    if (numClasses !== undefined) {
      const labels = batch.labels;
      for (let i = 0; i < labels.length; i++) {
        const label = labels[i]!;
        if (!(Number.isInteger(label) && label >= 0 && label < numClasses)) {
          throw new InvalidBatchError(`label ${label} of example ${i} is not a class index in [0, ${numClasses})`);
        }
      }
    }
  }

  private featuresTensor(batch: Batch, built: Built): tf.Tensor {
    const shape = [batch.size, ...built.inputShape];
    if (batch.featureBytes === undefined) return tf.tensor(batch.features, shape, 'float32');
    return this.byteFeatures.tensor(batch.featureBytes, shape, built.layout.scale);
  }

  private labelsTensor(batch: Batch, built: Built): tf.Tensor1D {
    const isClassification = built.layout.numClasses !== undefined;
    if (isClassification) {
      const labels = batch.labels instanceof Int32Array ? batch.labels : Int32Array.from(batch.labels);
      return tf.tensor1d(labels, 'int32');
    }
    const labels = batch.labels instanceof Float32Array ? batch.labels : Float32Array.from(batch.labels);
    return tf.tensor1d(labels, 'float32');
  }
}
