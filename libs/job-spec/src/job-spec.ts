/**
 * The job spec as Tributary uses it after validation: every field that has a default is filled
 * in, so consumers never apply defaults themselves. `proto/job.schema.json` is the contract these
 * types mirror; `JOB_SPEC.md` explains each field.
 */

/** Element type of the features stored in a record. */
export type FeatureDtype = 'uint8' | 'float32';

/** Element type of the label stored in a record. */
export type LabelDtype = 'int32' | 'float32';

/** What each record holds and how it becomes model input and label. */
export interface RecordLayout {
  /** Shape of one example's features and of the model input, without the batch dimension. */
  featureShape: number[];
  featureDtype: FeatureDtype;
  /** Factor applied to every feature when read (e.g. `1 / 255` for bytes). */
  scale: number;
  labelDtype: LabelDtype;
  /** Number of classes: present for classification, absent for regression on one value. */
  numClasses?: number;
}

/** The training and evaluation data. */
export interface DatasetSpec {
  /** Glob patterns of the RecordIO files to train on. */
  train: string[];
  /** Glob patterns of the held-out RecordIO files to evaluate on. */
  eval: string[];
  layout: RecordLayout;
}

/** Activation of the hidden layers of a preset model. */
export type Activation = 'relu' | 'tanh' | 'sigmoid' | 'elu';

/** The built-in multilayer perceptron. */
export interface MlpModelSpec {
  preset: 'mlp';
  /** Units of each hidden dense layer, input side first. */
  hiddenUnits: number[];
  activation: Activation;
  /** Dropout rate after each hidden layer, in [0, 1). */
  dropout: number;
}

/** The built-in convolutional network: per entry of `filters`, a convolution and 2x2 pooling. */
export interface CnnModelSpec {
  preset: 'cnn';
  /** Filters of each convolution layer, input side first. */
  filters: number[];
  /** Width and height of every convolution kernel. */
  kernelSize: number;
  /** Units of the dense layer before the output layer. */
  denseUnits: number;
  activation: Activation;
}

/**
 * A TensorFlow.js layers topology, as `model.toJSON(null, false)` returns it. A spec that gave
 * a `model.json` object (`{ modelTopology: ... }`) is unwrapped to this during validation.
 */
export interface LayersTopology {
  class_name: string;
  config: Record<string, unknown>;
  [key: string]: unknown;
}

/** A user-supplied layers model. */
export interface TopologyModelSpec {
  preset?: undefined;
  topology: LayersTopology;
}

/** The model to train; `preset` tells the kinds apart (absent for a topology). */
export type ModelSpec = MlpModelSpec | CnnModelSpec | TopologyModelSpec;

/**
 * How the learning rate changes with the model version; after `warmupSteps` steps of linear
 * warm-up (0: none) the schedule runs on the steps taken since. `step`: times `factor` every
 * `every` steps. `exponential`: times `decayRate` per `decaySteps` steps (in whole periods with
 * `staircase`). `cosine`: down to `minLearningRate` along half a cosine over `steps` steps.
 */
export type LearningRateScheduleSpec =
  | { type: 'constant'; warmupSteps: number }
  | { type: 'step'; warmupSteps: number; every: number; factor: number }
  | { type: 'exponential'; warmupSteps: number; decayRate: number; decaySteps: number; staircase: boolean }
  | { type: 'cosine'; warmupSteps: number; steps: number; minLearningRate: number };

/** The fields every optimizer takes. */
export interface OptimizerCommonSpec {
  learningRate: number;
  /** How the learning rate changes with the model version; absent: constant. */
  schedule?: LearningRateScheduleSpec;
  /** L2 weight decay added to the gradient (`adamw`: decoupled, taken off the weights). */
  weightDecay: number;
  /** Trainers scale their whole gradient down to this global L2 norm; absent: no clipping. */
  clipNorm?: number;
  /** Trainers clip every gradient element to [-clipValue, clipValue]; absent: no clipping. */
  clipValue?: number;
}

/** Plain stochastic gradient descent. */
export interface SgdOptimizerSpec extends OptimizerCommonSpec {
  type: 'sgd';
}

/** Gradient descent with momentum, as `tf.train.momentum`. */
export interface MomentumOptimizerSpec extends OptimizerCommonSpec {
  type: 'momentum';
  /** Momentum coefficient, in [0, 1). */
  momentum: number;
  /** Nesterov momentum. */
  useNesterov: boolean;
}

/** Adam, as `tf.train.adam`. */
export interface AdamOptimizerSpec extends OptimizerCommonSpec {
  type: 'adam';
  beta1: number;
  beta2: number;
  epsilon: number;
}

/** Adagrad, as `tf.train.adagrad`. */
export interface AdagradOptimizerSpec extends OptimizerCommonSpec {
  type: 'adagrad';
  /** Starting value of the sum of squared gradients. */
  initialAccumulatorValue: number;
  epsilon: number;
}

/** RMSProp, as `tf.train.rmsprop`. */
export interface RmspropOptimizerSpec extends OptimizerCommonSpec {
  type: 'rmsprop';
  /** Decay rate of the mean square of the gradients, in [0, 1). */
  decay: number;
  /** Momentum coefficient, in [0, 1). */
  momentum: number;
  epsilon: number;
  /** Normalise by the gradient's estimated variance rather than its mean square. */
  centered: boolean;
}

/** Adam with decoupled weight decay, as Keras's `AdamW`. */
export interface AdamwOptimizerSpec extends OptimizerCommonSpec {
  type: 'adamw';
  beta1: number;
  beta2: number;
  epsilon: number;
}

/** How the parameter servers turn gradients into updates; `type` tells the kinds apart. */
export type OptimizerSpec =
  | SgdOptimizerSpec
  | MomentumOptimizerSpec
  | AdamOptimizerSpec
  | AdagradOptimizerSpec
  | RmspropOptimizerSpec
  | AdamwOptimizerSpec;

/** The fields of a schedule a user may leave out (those with defaults). */
type ScheduleDefaults = 'warmupSteps' | 'factor' | 'staircase' | 'minLearningRate';

/** A schedule as a user may write it. */
export type LearningRateScheduleInput = LearningRateScheduleSpec extends infer S
  ? S extends LearningRateScheduleSpec
    ? Omit<S, Extract<keyof S, ScheduleDefaults>> & Partial<Pick<S, Extract<keyof S, ScheduleDefaults>>>
    : never
  : never;

/** An optimizer as a user may write it: `type` and `learningRate`, the rest optional. */
export type OptimizerInput = OptimizerSpec extends infer O
  ? O extends OptimizerSpec
    ? Pick<O, 'type' | 'learningRate'> &
        Partial<Omit<O, 'type' | 'learningRate' | 'schedule'>> & {
          schedule?: LearningRateScheduleInput;
        }
    : never
  : never;

/**
 * `sync`: one step per model version once every live trainer (but `backupTrainers`) reported;
 * `async`: apply each gradient as it comes; `ssp`: sync steps that trainers may run ahead of by
 * up to `maxStaleness` versions; `local`: trainers push parameter deltas after `localSteps`
 * local SGD steps.
 */
export type TrainingMode = 'sync' | 'async' | 'ssp' | 'local';

/** When a claimed task counts as lost: after max(floorMs, multiplier x mean task time). */
export interface TaskTimeoutSpec {
  floorMs: number;
  multiplier: number;
}

/** How work is cut up and handed out, and how failures are tolerated. */
export interface TrainingSpec {
  mode: TrainingMode;
  /** sync only (then present): trainers a step does not wait for; their late gradients are dropped. */
  backupTrainers?: number;
  /** async only (then present): scale each gradient's learning rate by 1 / max(1, its staleness). */
  stalenessAware?: boolean;
  /** async only (then present): train the next minibatch while the previous update is on its way. */
  overlapPushes?: boolean;
  /** ssp only (then present): versions a trainer's parameters may lag the version its gradient counts in. */
  maxStaleness?: number;
  /** local only (then present): local SGD steps between two pushes of a parameter delta. */
  localSteps?: number;
  /** local only (then present): average the deltas of a round (true) or add each as it comes (false). */
  localSync?: boolean;
  /** local only, optional: elastic averaging (EASGD) with this moving rate. */
  elasticAlpha?: number;
  /** local only (then present): train the next round while the last round's delta is on its way. */
  overlapRounds?: boolean;
  /**
   * local only (then present): a synchronous round ends once every trainer took `localSteps`
   * (`steps`), or once the first did, the others pushing after the step they are on (`first`).
   */
  roundEnd?: 'steps' | 'first';
  /** Examples per minibatch; one gradient push per minibatch. */
  batchSize: number;
  /** RecordIO chunks per task. */
  chunksPerTask: number;
  /** Failures (or timeouts) in one epoch after which a task is discarded for the rest of that epoch. */
  maxTaskFailures: number;
  /** Recomputations of a minibatch whose gradient was refused as stale, before the task fails. */
  maxGradientRetries: number;
  taskTimeout: TaskTimeoutSpec;
  /**
   * Seed of initial weights, task order and record order. Absent in a spec as submitted without
   * one; the master picks one at submission, so every spec it stores and hands out has it.
   */
  seed?: number;
  /** Tasks in a fresh seeded order each epoch and records through a seeded shuffle buffer; false: file order. */
  shuffle: boolean;
  /** Records in a task's shuffle buffer; absent for as many as the task's largest chunk holds. */
  shuffleBuffer?: number;
}

/** How many trainers the job waits for and uses at most. */
export interface TrainersSpec {
  min: number;
  max: number;
}

/** The parameter servers holding the model. */
export interface PserversSpec {
  /** Number of parameter shards. */
  count: number;
  /**
   * Large parameters cut into blocks of rows held by different shards. Absent: whole
   * parameters (a job stored before blocks existed); the master sets it on every job it takes.
   */
  partition?: { minElements: number };
}

/** Element type a float32 tensor travels in between trainers and parameter servers. */
export type TransferDtype = 'float32' | 'float16' | 'bfloat16';

/**
 * How tensors travel between trainers and parameter servers; the parameter servers keep and
 * update the parameters in float32 whatever travels.
 */
export interface TransferSpec {
  /** Type of the gradients trainers push. */
  dtype: TransferDtype;
  /** Type of the parameters sent back to the trainers (the evaluator always pulls float32). */
  params: TransferDtype;
}

/** What the evaluator measures: accuracy (higher is better) or loss (lower is better). */
export type EvaluationMetric = 'accuracy' | 'loss';

/** When and how snapshots are evaluated. */
export interface EvaluationSpec {
  everySteps: number;
  /** Also evaluate after this many seconds; absent to evaluate by steps only. */
  everySeconds?: number;
  metric: EvaluationMetric;
  /** Examples per inference batch. */
  batchSize: number;
  /** Examples scored per evaluation at most; absent for all of the eval files. */
  maxExamples?: number;
}

/** When the job ends, whichever condition is met first; at least one is present. */
export interface StopPolicySpec {
  /** Metric value to reach: accuracy >= target, or loss <= target. */
  target?: number;
  /** Evaluations in a row without a new best metric. */
  patience?: number;
  /** Passes over the training files. */
  maxEpochs?: number;
  /** Seconds since the job started. */
  maxSeconds?: number;
}

/** How often parameter servers checkpoint their shards. */
export interface CheckpointSpec {
  /** Also checkpoint after every this many steps; absent to checkpoint by time only. */
  everySteps?: number;
  everySeconds: number;
  /** Checkpoints kept per shard (>= 2). */
  keep: number;
}

/** A validated training job, defaults applied. */
export interface JobSpec {
  /** Identifier used in NATS subjects and Redis keys. */
  id: string;
  dataset: DatasetSpec;
  model: ModelSpec;
  optimizer: OptimizerSpec;
  training: TrainingSpec;
  trainers: TrainersSpec;
  pservers: PserversSpec;
  transfer: TransferSpec;
  evaluation: EvaluationSpec;
  stop: StopPolicySpec;
  checkpoint: CheckpointSpec;
  /** Directory for model.json, the weights and summary.json. */
  output: string;
}

/**
 * A job spec as a user may write it: fields with defaults are optional. Useful for building
 * specs in code; pass the result to `validateJobSpec`.
 */
export interface JobSpecInput {
  $schema?: string;
  id: string;
  dataset: {
    train: string[];
    eval: string[];
    layout: Omit<RecordLayout, 'scale'> & { scale?: number };
  };
  model:
    | ({ preset: 'mlp' } & Partial<Omit<MlpModelSpec, 'preset'>>)
    | ({ preset: 'cnn' } & Partial<Omit<CnnModelSpec, 'preset'>>)
    | { topology: Record<string, unknown> };
  optimizer: OptimizerInput;
  training: { batchSize: number } & Partial<Omit<TrainingSpec, 'taskTimeout'>> & {
      taskTimeout?: Partial<TaskTimeoutSpec>;
    };
  trainers?: Partial<TrainersSpec>;
  pservers?: Partial<PserversSpec>;
  transfer?: Partial<TransferSpec>;
  evaluation?: Partial<EvaluationSpec>;
  stop: StopPolicySpec;
  checkpoint?: Partial<CheckpointSpec>;
  output: string;
}
