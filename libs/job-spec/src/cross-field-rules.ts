import type { JobSpecViolation } from './errors.js';
import { isRecord } from './field-path.js';
import { resolveTopology } from './layers-topology.js';
import { cnnInputShape, maxCnnLayers } from './model-input.js';
import { trainingModeViolations } from './training-modes.js';

/**
 * A rule relating several fields, which the JSON Schema cannot express. Rules run on the spec
 * after defaults, even when the schema found problems, so one pass reports everything: each
 * rule looks only at fields whose types it can trust and stays silent otherwise.
 */
type CrossFieldRule = (spec: Record<string, unknown>) => JobSpecViolation[];

const RULES: readonly CrossFieldRule[] = [
  classificationNeedsIntLabels,
  cnnNeedsImageInput,
  topologyIsLayersModel,
  trainersMaxAtLeastMin,
  accuracyNeedsClasses,
  stopTargetInMetricRange,
  shuffleBufferNeedsShuffle,
  trainingModeViolations,
  minLearningRateBelowBase,
];

/** Every cross-field violation of a (possibly invalid) spec. */
export function crossFieldViolations(spec: unknown): JobSpecViolation[] {
  return isRecord(spec) ? RULES.flatMap((rule) => rule(spec)) : [];
}

/** The value at a path of own properties, or undefined where the path leaves the objects. */
function at(value: unknown, ...keys: string[]): unknown {
  let node = value;
  for (const key of keys) {
    if (!isRecord(node) || !Object.hasOwn(node, key)) return undefined;
    node = node[key];
  }
  return node;
}

function isPositiveIntArray(value: unknown): value is number[] {
  return Array.isArray(value) && value.every((d) => Number.isInteger(d) && (d as number) >= 1);
}

function classificationNeedsIntLabels(spec: Record<string, unknown>): JobSpecViolation[] {
  const layout = at(spec, 'dataset', 'layout');
  if (at(layout, 'numClasses') === undefined || at(layout, 'labelDtype') !== 'float32') return [];
  return [
    {
      field: 'dataset.layout.labelDtype',
      reason: 'must be int32 for classification (dataset.layout.numClasses is set)',
    },
  ];
}

function cnnNeedsImageInput(spec: Record<string, unknown>): JobSpecViolation[] {
  const featureShape = at(spec, 'dataset', 'layout', 'featureShape');
  if (at(spec, 'model', 'preset') !== 'cnn' || !isPositiveIntArray(featureShape) || featureShape.length === 0) {
    return [];
  }
  const image = cnnInputShape(featureShape);
  if (image === undefined) {
    return [
      {
        field: 'dataset.layout.featureShape',
        reason: `the cnn preset needs [height, width, channels] or [n] with n a perfect square (got [${featureShape.join(', ')}])`,
      },
    ];
  }
  const filters = at(spec, 'model', 'filters');
  const allowed = maxCnnLayers(image);
  if (!Array.isArray(filters) || filters.length <= allowed) return [];
  return [
    {
      field: 'model.filters',
      reason:
        `has ${filters.length} convolution layers but a ${image[0]}x${image[1]} input allows at most ${allowed} ` +
        '(each layer halves height and width)',
    },
  ];
}

function topologyIsLayersModel(spec: Record<string, unknown>): JobSpecViolation[] {
  const topology = at(spec, 'model', 'topology');
  if (!isRecord(topology) || resolveTopology(topology) !== undefined) return [];
  return [
    {
      field: 'model.topology',
      reason:
        'must be a layers model topology: an object with class_name and config, as model.toJSON(null, false) ' +
        'returns, or a model.json object whose modelTopology holds one',
    },
  ];
}

function trainersMaxAtLeastMin(spec: Record<string, unknown>): JobSpecViolation[] {
  const min = at(spec, 'trainers', 'min');
  const max = at(spec, 'trainers', 'max');
  if (!Number.isInteger(min) || !Number.isInteger(max) || (max as number) >= (min as number)) return [];
  return [{ field: 'trainers', reason: `max (${String(max)}) must be >= min (${String(min)})` }];
}

function accuracyNeedsClasses(spec: Record<string, unknown>): JobSpecViolation[] {
  const layout = at(spec, 'dataset', 'layout');
  if (at(spec, 'evaluation', 'metric') !== 'accuracy' || !isRecord(layout) || Object.hasOwn(layout, 'numClasses')) {
    return [];
  }
  return [
    {
      field: 'evaluation.metric',
      reason: 'accuracy needs dataset.layout.numClasses (a classification job); use loss for regression',
    },
  ];
}

function stopTargetInMetricRange(spec: Record<string, unknown>): JobSpecViolation[] {
  const target = at(spec, 'stop', 'target');
  const metric = at(spec, 'evaluation', 'metric');
  if (typeof target !== 'number' || !Number.isFinite(target)) return [];
  if (metric === 'accuracy' && !(target > 0 && target <= 1)) {
    return [{ field: 'stop.target', reason: `must be in (0, 1] for metric accuracy (got ${target})` }];
  }
  if (metric === 'loss' && target < 0) {
    return [{ field: 'stop.target', reason: `must be >= 0 for metric loss (got ${target})` }];
  }
  return [];
}

function shuffleBufferNeedsShuffle(spec: Record<string, unknown>): JobSpecViolation[] {
  const training = at(spec, 'training');
  if (at(training, 'shuffle') !== false || !isRecord(training) || !Object.hasOwn(training, 'shuffleBuffer')) return [];
  return [{ field: 'training.shuffleBuffer', reason: 'applies only when training.shuffle is true' }];
}

function minLearningRateBelowBase(spec: Record<string, unknown>): JobSpecViolation[] {
  const base = at(spec, 'optimizer', 'learningRate');
  const floor = at(spec, 'optimizer', 'schedule', 'minLearningRate');
  if (typeof base !== 'number' || typeof floor !== 'number' || floor <= base) return [];
  return [
    {
      field: 'optimizer.schedule.minLearningRate',
      reason: `must be <= optimizer.learningRate (${base}) (got ${floor})`,
    },
  ];
}
