import { Ajv, type ValidateFunction } from 'ajv';

import { crossFieldViolations } from './cross-field-rules.js';
import { InvalidJobSpecError, ROOT_FIELD, type JobSpecViolation } from './errors.js';
import { isRecord } from './field-path.js';
import { loadJobSchema } from './job-schema.js';
import { copyAsJsonData } from './json-data.js';
import type { JobSpec } from './job-spec.js';
import { resolveTopology } from './layers-topology.js';
import { defaultMetric } from './objective.js';
import { schemaViolations } from './schema-violations.js';
import { applyTrainingModeDefaults } from './training-modes.js';

interface CompiledSchema {
  readonly validate: ValidateFunction;
  /** The top-level fields in the order the schema lists them, for ordering violations. */
  readonly sections: readonly string[];
}

let compiledSchema: CompiledSchema | undefined;

/** The schema validator, compiled on first use and shared afterwards. */
function compiled(): CompiledSchema {
  if (compiledSchema !== undefined) return compiledSchema;
  const schema = loadJobSchema();
  const validate = new Ajv({
    allErrors: true,
    useDefaults: true,
    verbose: true,
    strict: true,
    // Fields named in `required` of the if/then branches are declared in the branch bodies.
    strictRequired: false,
  }).compile(schema);
  const properties = schema['properties'];
  compiledSchema = { validate, sections: isRecord(properties) ? Object.keys(properties) : [] };
  return compiledSchema;
}

/**
 * Compiles the schema validator now (about 0.2 s of CPU) rather than at the first job spec:
 * services call it as they start, so that their first job does not wait for it. It never throws:
 * when the schema cannot be read or compiled, the first validation reports why, where the
 * service handles a job it cannot take.
 */
export function prepareJobSpecValidation(): void {
  try {
    compiled();
  } catch {
    // Left for validateJobSpec to raise.
  }
}

/**
 * Validates a job spec against `proto/job.schema.json` and the cross-field rules, and returns
 * it with every default applied. The input is not modified, and must be JSON data (what
 * JSON.parse returns; `undefined` properties are ignored). A `model.topology` given as a
 * model.json object is unwrapped to the topology itself, and `$schema` is dropped.
 * @throws InvalidJobSpecError listing every violation found.
 */
export function validateJobSpec(input: unknown): JobSpec {
  return checkJobSpec(input, []);
}

/**
 * {@link validateJobSpec} with violations found earlier (while parsing) reported alongside.
 * @throws InvalidJobSpecError when `earlier` or the checks found anything.
 */
export function checkJobSpec(input: unknown, earlier: readonly JobSpecViolation[]): JobSpec {
  const { data: document, violations: notJson } = copyAsJsonData(input);
  const { validate, sections } = compiled();
  const violations = [...earlier, ...notJson];
  if (!validate(document)) {
    // A value JSON cannot carry is null in the copy; the schema's complaint about that null says less.
    const notJsonFields = new Set(notJson.map((v) => v.field));
    const fromSchema = schemaViolations(validate.errors ?? [], document);
    violations.push(...fromSchema.filter((v) => !notJsonFields.has(v.field) || v.reason.startsWith('unknown field')));
  }
  applyMetricDefault(document);
  violations.push(...crossFieldViolations(document));
  if (violations.length > 0) {
    const id = isRecord(document) ? document['id'] : undefined;
    throw new InvalidJobSpecError(inDocumentOrder(violations, sections), {
      jobId: typeof id === 'string' ? id : undefined,
    });
  }
  return normalize(document as Record<string, unknown>);
}

/** The default metric depends on the layout, so the schema leaves it to code. */
function applyMetricDefault(document: unknown): void {
  if (!isRecord(document)) return;
  const evaluation = document['evaluation'];
  const layout = isRecord(document['dataset']) ? document['dataset']['layout'] : undefined;
  if (!isRecord(evaluation) || Object.hasOwn(evaluation, 'metric') || !isRecord(layout)) return;
  evaluation['metric'] = defaultMetric({ numClasses: layout['numClasses'] as number | undefined });
}

function normalize(document: Record<string, unknown>): JobSpec {
  delete document['$schema'];
  applyTrainingModeDefaults(document['training'] as Record<string, unknown>);
  const model = document['model'] as Record<string, unknown>;
  if (Object.hasOwn(model, 'topology')) {
    model['topology'] = resolveTopology(model['topology']);
  }
  return document as unknown as JobSpec;
}

/** Sorts violations by the top-level section they concern, in the order the schema lists them. */
function inDocumentOrder(violations: JobSpecViolation[], sections: readonly string[]): JobSpecViolation[] {
  const rank = (field: string): number => {
    if (field === ROOT_FIELD) return -1;
    const section = /^[A-Za-z_$][A-Za-z0-9_$]*/.exec(field)?.[0];
    const index = section === undefined ? -1 : sections.indexOf(section);
    return index === -1 ? sections.length : index;
  };
  return violations
    .map((violation, position) => ({ violation, position, rank: rank(violation.field) }))
    .sort((a, b) => a.rank - b.rank || a.position - b.position)
    .map((entry) => entry.violation);
}
