/**
 * The parts of a job spec that a learner needs: the model and the record layout, with the job
 * spec library's types, so a parsed job spec can be passed in as is.
 */
import type { CnnModelSpec, MlpModelSpec, RecordLayout } from '#libs/job-spec';

export type { Activation, CnnModelSpec, FeatureDtype, LabelDtype, MlpModelSpec, RecordLayout } from '#libs/job-spec';

/**
 * A model given by its Keras-style topology: the JSON of `model.toJSON(null, false)`, or an
 * object with a `modelTopology` field holding it (the `model.json` format). Weights are ignored.
 * Looser than the job spec's form, which is already unwrapped.
 */
export interface TopologyModelSpec {
  topology: Record<string, unknown>;
}

/** How the model is described: a preset, or a topology. */
export type ModelSpec = MlpModelSpec | CnnModelSpec | TopologyModelSpec;

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
