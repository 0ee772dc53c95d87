import type { ErrorObject } from 'ajv';

import type { JobSpecViolation } from './errors.js';
import { formatFieldPath, isRecord, pointerSegments, type PathSegment } from './field-path.js';

/** Keywords whose errors only repeat what the errors of their subschemas already say. */
const SUMMARY_KEYWORDS = new Set(['if', 'anyOf', 'oneOf', 'allOf', 'not', '$ref']);

const MAX_VALUE_PREVIEW_CHARS = 40;

const ID_RULE = '1 to 63 characters of a-z, 0-9, _ and -, starting with a letter or digit';

/**
 * Turns ajv's errors (compiled with `allErrors` and `verbose`) into violations with readable
 * field paths and reasons, dropping the summary errors of `if`/`anyOf`/... and duplicates.
 */
export function schemaViolations(errors: readonly ErrorObject[], document: unknown): JobSpecViolation[] {
  const seen = new Set<string>();
  const out: JobSpecViolation[] = [];
  for (const error of errors) {
    if (SUMMARY_KEYWORDS.has(error.keyword)) continue;
    const violation = translate(error, pointerSegments(error.instancePath, document));
    const key = `${violation.field}\u0000${violation.reason}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push(violation);
  }
  return out;
}

function translate(error: ErrorObject, path: PathSegment[]): JobSpecViolation {
  const params = error.params as Record<string, unknown>;
  const field = formatFieldPath(path);
  const got = error.data;
  switch (error.keyword) {
    case 'required': {
      const missing = String(params['missingProperty']);
      if (field === 'model' && missing === 'preset') {
        return { field, reason: 'needs either preset (mlp or cnn) or topology' };
      }
      return { field: formatFieldPath([...path, missing]), reason: 'is required' };
    }
    case 'additionalProperties': {
      const extra = String(params['additionalProperty']);
      return { field: formatFieldPath([...path, extra]), reason: unknownFieldReason(extra, allowedFields(error)) };
    }
    case 'type':
      return { field, reason: `must be ${withArticle(String(params['type']))} (got ${preview(got)})` };
    case 'enum':
      return {
        field,
        reason: `must be one of ${(params['allowedValues'] as unknown[]).join(', ')} (got ${preview(got)})`,
      };
    case 'const':
      return { field, reason: `must be ${JSON.stringify(params['allowedValue'])} (got ${preview(got)})` };
    case 'minimum':
    case 'maximum':
    case 'exclusiveMinimum':
    case 'exclusiveMaximum':
      return {
        field,
        reason: `must be ${String(params['comparison'])} ${String(params['limit'])} (got ${preview(got)})`,
      };
    case 'minItems':
      return { field, reason: `must have at least ${plural(Number(params['limit']), 'entry', 'entries')}` };
    case 'maxItems':
      return { field, reason: `must have at most ${plural(Number(params['limit']), 'entry', 'entries')}` };
    case 'minLength':
      return {
        field,
        reason: params['limit'] === 1 ? 'must not be empty' : `must be at least ${String(params['limit'])} characters`,
      };
    case 'pattern':
      return {
        field,
        reason: field === 'id' ? `must be ${ID_RULE} (got ${preview(got)})` : `must match ${String(params['pattern'])}`,
      };
    case 'minProperties':
      return { field, reason: `needs at least one of ${allowedFields(error).join(', ')}` };
    default:
      return { field, reason: error.message ?? `fails ${error.keyword}` };
  }
}

function allowedFields(error: ErrorObject): string[] {
  const properties = isRecord(error.parentSchema) ? error.parentSchema['properties'] : undefined;
  return isRecord(properties) ? Object.keys(properties).filter((name) => name !== '$schema') : [];
}

function unknownFieldReason(name: string, allowed: readonly string[]): string {
  if (allowed.length === 0) return 'unknown field';
  const suggestion = closestName(name, allowed);
  return suggestion === undefined
    ? `unknown field (allowed: ${allowed.join(', ')})`
    : `unknown field (did you mean ${suggestion}?)`;
}

/** The allowed name a typo most likely meant: same letters ignoring case, or a small edit away. */
function closestName(name: string, allowed: readonly string[]): string | undefined {
  const lower = name.toLowerCase();
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const candidate of allowed) {
    const distance = editDistance(lower, candidate.toLowerCase());
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  const tolerance = Math.max(1, Math.floor(name.length / 4));
  return bestDistance <= tolerance ? best : undefined;
}

function editDistance(a: string, b: string): number {
  if (Math.abs(a.length - b.length) > 8) return Infinity;
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const substitution = previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1);
      current.push(Math.min(previous[j]! + 1, current[j - 1]! + 1, substitution));
    }
    previous = current;
  }
  return previous[b.length]!;
}

function withArticle(type: string): string {
  return type
    .split(',')
    .map((t) => (/^[aeiou]/.test(t) ? `an ${t}` : `a ${t}`))
    .join(' or ');
}

function plural(n: number, one: string, many: string): string {
  return `${n} ${n === 1 ? one : many}`;
}

/** A short rendering of an offending value for a message: `"rms"`, `0`, `an object`. */
export function preview(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  switch (typeof value) {
    case 'string': {
      const text = JSON.stringify(value);
      return text.length > MAX_VALUE_PREVIEW_CHARS ? `${text.slice(0, MAX_VALUE_PREVIEW_CHARS)}..."` : text;
    }
    case 'number':
    case 'boolean':
      return String(value);
    case 'bigint':
      return `${value}n`;
    case 'object':
      return 'an object';
    default:
      return typeof value;
  }
}
