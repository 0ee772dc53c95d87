/**
 * The learner library: the TensorFlow.js side of Tributary. Backend selection, the models a
 * job spec describes, the learner interface a trainer drives, record decoding and model export.
 */
export { BACKEND_CHOICES, BACKEND_ENV_VAR, prepareWasmBackend, selectBackend, selectWasmKernels } from './backend.js';
export type { BackendChoice, BackendInfo, BackendKind, SelectBackendOptions, WasmBackendModule } from './backend.js';

export { FeatureWriter, checkRecords, decodeBatch } from './batch.js';
export { byteConversion, plainByteConversion } from './byte-features.js';
export type { ByteConversion, ByteConversionKernel } from './byte-features.js';
export type { CheckedRecords } from './batch.js';

export {
  BackendUnavailableError,
  InvalidBatchError,
  LearnerStateError,
  ModelFilesError,
  ModelSpecError,
  ParamMismatchError,
  RecordLayoutError,
  WasmHeapExhaustedError,
} from './errors.js';

export type { KernelPath, KernelPathInfo } from './kernels/kernel-path.js';
export {
  backendKernelBehind,
  registerWasmKernels,
  WASM_FRONTED_KERNELS,
  WASM_FUSED_GRADIENTS,
  WASM_MISSING_KERNELS,
  WASM_REPLACED_KERNELS,
} from './kernels/register.js';
export type { FrontedKernel, FusedGradient } from './kernels/register.js';
export { tfjsReluGradient } from './kernels/relu-grad.js';

export { DEFAULT_LOCAL_LEARNING_RATE, TfjsLearner } from './learner.js';
export { localOptimizerFor, tfjsLocalOptimizer, tfjsLocalOptimizerFor } from './local-optimizer.js';
export type { LocalOptimizer, LocalOptimizerPath } from './local-optimizer.js';
export type {
  Batch,
  EvaluationResult,
  Learner,
  PlainTensor,
  PlainTensorDtype,
  TfjsLearnerOptions,
  TrainResult,
  UpdateMode,
} from './learner.js';

export { MIN_PROBABILITY } from './loss-head.js';
export type { LossHead, OutputKind } from './loss-head.js';

export {
  fileSystemModelHandler,
  loadLayersModelFromDir,
  MODEL_JSON_FILE,
  saveLayersModel,
  WEIGHTS_FILE,
} from './model-export.js';

export { isPresetModel } from './model-spec.js';
export type {
  Activation,
  CnnModelSpec,
  FeatureDtype,
  LabelDtype,
  LearnerSpec,
  MlpModelSpec,
  ModelSpec,
  RecordLayout,
  TopologyModelSpec,
} from './model-spec.js';

export {
  buildModel,
  modelInputShape,
  OUTPUT_LAYER_NAME,
  PRESET_ACTIVATIONS,
  PROBABILITIES_LAYER_NAME,
} from './models.js';

export { namedTrainableVariables } from './param-names.js';
export type { NamedVariable } from './param-names.js';
