import { ROOT_FIELD, type JobSpecViolation } from './errors.js';
import type { JobSpec, ModelSpec, RecordLayout } from './job-spec.js';
import { cnnInputShape, featureCount } from './model-input.js';

/** What a cluster accepts of one job, beyond what the schema says of any spec. */
export interface JobLimits {
  /** Most trainable parameters of a job's model (`MAX_JOB_PARAMETERS`). */
  maxParameters: number;
  /** Most bytes of a submitted spec (`MAX_JOB_SPEC_BYTES`). */
  maxSpecBytes: number;
}

/** Units of a dense layer: `inputs` weights per unit plus a bias. */
function denseParameters(inputs: number, units: number): number {
  return inputs * units + units;
}

/**
 * Trainable parameters of a model spec, counted from the spec alone (before anything is
 * built): exact for the `mlp` and `cnn` presets; undefined for a topology, whose size is only
 * known once built.
 */
export function modelParameterCount(model: ModelSpec, layout: RecordLayout): number | undefined {
  const outputs = layout.numClasses ?? 1;
  if (model.preset === 'mlp') {
    let inputs = featureCount(layout.featureShape);
    let total = 0;
    for (const units of model.hiddenUnits) {
      total += denseParameters(inputs, units);
      inputs = units;
    }
    return total + denseParameters(inputs, outputs);
  }
  if (model.preset === 'cnn') {
    const shape = layout.featureShape;
    const image = shape.length === 2 ? [shape[0]!, shape[1]!, 1] : cnnInputShape(shape);
    if (image === undefined) return undefined;
    let [height, width, channels] = image as [number, number, number];
    let total = 0;
    for (const filters of model.filters) {
      total += model.kernelSize * model.kernelSize * channels * filters + filters;
      channels = filters;
      height = Math.floor(height / 2);
      width = Math.floor(width / 2);
    }
    total += denseParameters(height * width * channels, model.denseUnits);
    return total + denseParameters(model.denseUnits, outputs);
  }
  return undefined;
}

/**
 * Where a valid spec exceeds the cluster's limits: each violation names the field and the
 * limit (by its setting), so the refusal says what to change.
 */
export function jobLimitViolations(spec: JobSpec, limits: Pick<JobLimits, 'maxParameters'>): JobSpecViolation[] {
  const parameters = modelParameterCount(spec.model, spec.dataset.layout);
  if (parameters === undefined || parameters <= limits.maxParameters) return [];
  return [
    {
      field: 'model',
      reason:
        `has ${parameters.toLocaleString('en-US')} parameters, more than MAX_JOB_PARAMETERS ` +
        `(${limits.maxParameters.toLocaleString('en-US')})`,
    },
  ];
}

/** The violation of a spec of `bytes` bytes over `maxSpecBytes`, if it is. */
export function specSizeViolation(bytes: number, maxSpecBytes: number): JobSpecViolation | undefined {
  if (bytes <= maxSpecBytes) return undefined;
  return { field: ROOT_FIELD, reason: `is ${bytes} bytes, more than MAX_JOB_SPEC_BYTES (${maxSpecBytes})` };
}
