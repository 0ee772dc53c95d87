/**
 * The job spec: its types, validation against `proto/job.schema.json` and the cross-field
 * rules, and small questions every service asks of a spec.
 */
export { InvalidJobSpecError, JobSchemaUnavailableError, ROOT_FIELD } from './errors.js';
export type { JobSpecViolation } from './errors.js';
export { prepareJobSpecValidation, validateJobSpec } from './validate-job-spec.js';
export { parseJobSpec } from './parse-job-spec.js';
export { JOB_SCHEMA_RELATIVE_PATH, jobSchemaPath, loadJobSchema } from './job-schema.js';
export { defaultMetric, isClassification, metricDirection, reachesTarget } from './objective.js';
export type { MetricDirection } from './objective.js';
export { cnnInputShape, featureCount, maxCnnLayers } from './model-input.js';
export type { ImageShape } from './model-input.js';
export { resolveTopology } from './layers-topology.js';
export { DEFAULT_TRAINING_MODE, LOCAL_OPTIMIZER_TYPES, TRAINING_MODE_FIELDS } from './training-modes.js';
export { jobLimitViolations, modelParameterCount, specSizeViolation } from './job-limits.js';
export type { JobLimits } from './job-limits.js';
export type {
  Activation,
  AdagradOptimizerSpec,
  AdamOptimizerSpec,
  AdamwOptimizerSpec,
  CheckpointSpec,
  CnnModelSpec,
  DatasetSpec,
  EvaluationMetric,
  EvaluationSpec,
  FeatureDtype,
  JobSpec,
  JobSpecInput,
  LabelDtype,
  LayersTopology,
  LearningRateScheduleInput,
  LearningRateScheduleSpec,
  MlpModelSpec,
  ModelSpec,
  MomentumOptimizerSpec,
  OptimizerCommonSpec,
  OptimizerInput,
  OptimizerSpec,
  PserversSpec,
  RecordLayout,
  RmspropOptimizerSpec,
  SgdOptimizerSpec,
  StopPolicySpec,
  TaskTimeoutSpec,
  TopologyModelSpec,
  TrainersSpec,
  TrainingMode,
  TrainingSpec,
  TransferDtype,
  TransferSpec,
} from './job-spec.js';
