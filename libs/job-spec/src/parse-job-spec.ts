import { InvalidJobSpecError, ROOT_FIELD, type JobSpecViolation } from './errors.js';
import { formatFieldPath } from './field-path.js';
import type { JobSpec } from './job-spec.js';
import { scanJsonText } from './json-text.js';
import { checkJobSpec } from './validate-job-spec.js';

const UTF8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Parses a job spec from JSON text or UTF-8 bytes (a NATS message payload, a file) and
 * validates it like {@link validateJobSpec}. A key repeated within one object is a violation
 * too, since JSON.parse would silently keep only the last.
 * @throws InvalidJobSpecError for bad UTF-8, bad JSON (field `(root)`, with line, column and
 * position) and every violation of the spec itself.
 */
export function parseJobSpec(bytes: Uint8Array | string): JobSpec {
  const text = decodeText(bytes);
  if (text.trim() === '') {
    throw new InvalidJobSpecError([{ field: ROOT_FIELD, reason: 'is empty; expected a JSON object' }]);
  }
  const scan = scanJsonText(text);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (cause) {
    const where = scan.syntaxError;
    const reason =
      where === undefined
        ? `is not valid JSON: ${(cause as Error).message}`
        : `is not valid JSON: ${where.problem} at line ${where.line}, column ${where.column} (position ${where.position})`;
    throw new InvalidJobSpecError([{ field: ROOT_FIELD, reason }], { cause });
  }
  if (scan.syntaxError !== undefined) {
    const { problem, line, column } = scan.syntaxError;
    throw new InvalidJobSpecError([{ field: ROOT_FIELD, reason: `${problem} at line ${line}, column ${column}` }]);
  }
  const duplicates: JobSpecViolation[] = scan.duplicateKeys.map((path) => ({
    field: formatFieldPath(path),
    reason: 'appears more than once in its object',
  }));
  return checkJobSpec(value, duplicates);
}

function decodeText(bytes: Uint8Array | string): string {
  if (typeof bytes === 'string') return bytes.startsWith('\uFEFF') ? bytes.slice(1) : bytes;
  try {
    return UTF8.decode(bytes);
  } catch (cause) {
    throw new InvalidJobSpecError([{ field: ROOT_FIELD, reason: 'is not valid UTF-8' }], { cause });
  }
}
