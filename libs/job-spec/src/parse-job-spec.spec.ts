import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

import fc from 'fast-check';

import { InvalidJobSpecError, type JobSpecViolation } from './errors.js';
import { parseJobSpec } from './parse-job-spec.js';
import { validateJobSpec } from './validate-job-spec.js';

const EXAMPLE_TEXT = readFileSync(
  fileURLToPath(new URL('../../../examples/fashion-mnist-mlp.json', import.meta.url)),
  'utf8',
);

function refusal(input: Uint8Array | string): InvalidJobSpecError {
  try {
    parseJobSpec(input);
  } catch (error) {
    if (error instanceof InvalidJobSpecError) return error;
    throw error;
  }
  throw new Error('expected the spec to be refused');
}

function only(error: InvalidJobSpecError): JobSpecViolation {
  expect(error.violations).toHaveLength(1);
  return error.violations[0]!;
}

describe('job spec parsing', () => {
  it('job spec parsing - text and bytes parse to the validated spec', () => {
    const expected = validateJobSpec(JSON.parse(EXAMPLE_TEXT));
    expect(parseJobSpec(EXAMPLE_TEXT)).toEqual(expected);
    expect(parseJobSpec(new TextEncoder().encode(EXAMPLE_TEXT))).toEqual(expected);
  });

  it('job spec parsing - a byte order mark is skipped', () => {
    expect(parseJobSpec(`\uFEFF${EXAMPLE_TEXT}`).id).toBe('fashion-mnist-mlp');
    const bytes = new Uint8Array([0xef, 0xbb, 0xbf, ...new TextEncoder().encode(EXAMPLE_TEXT)]);
    expect(parseJobSpec(bytes).id).toBe('fashion-mnist-mlp');
  });

  it('job spec parsing - bad JSON is refused at (root) with line, column and position', () => {
    const text = '{\n  "id": "x",\n  "output": "o",\n}';
    const error = refusal(text);
    expect(only(error)).toEqual({
      field: '(root)',
      reason: 'is not valid JSON: expected a double-quoted field name at line 4, column 1 (position 32)',
    });
    expect(error.cause).toBeInstanceOf(SyntaxError);
    expect(error.message).toBe(`invalid job spec: (root): ${only(error).reason}`);
  });

  it('job spec parsing - truncated and trailing text are located', () => {
    expect(only(refusal('{"id": "x"')).reason).toBe(
      "is not valid JSON: unexpected end of input, expected ',' or '}' at line 1, column 11 (position 10)",
    );
    expect(only(refusal('{} {}')).reason).toBe(
      'is not valid JSON: unexpected text after the document at line 1, column 4 (position 3)',
    );
  });

  it('job spec parsing - empty input and bad UTF-8 are refused', () => {
    expect(only(refusal('  \n'))).toEqual({ field: '(root)', reason: 'is empty; expected a JSON object' });
    expect(only(refusal(new Uint8Array([0x7b, 0xff, 0x7d])))).toEqual({
      field: '(root)',
      reason: 'is not valid UTF-8',
    });
  });

  it('job spec parsing - a repeated key is a violation beside the others', () => {
    const text = EXAMPLE_TEXT.replace('"learningRate": 0.001', '"learningRate": 0.001, "learningRate": 0').replace(
      '"count": 2',
      '"count": 0',
    );
    expect(refusal(text).violations).toEqual([
      { field: 'optimizer.learningRate', reason: 'appears more than once in its object' },
      { field: 'optimizer.learningRate', reason: 'must be > 0 (got 0)' },
      { field: 'pservers.count', reason: 'must be >= 1 (got 0)' },
    ]);
    expect(refusal(text).jobId).toBe('fashion-mnist-mlp');
  });

  it('job spec parsing - nesting deeper than the limit is refused', () => {
    const text = `{"model": {"topology": ${'['.repeat(600)}${']'.repeat(600)}}}`;
    expect(only(refusal(text)).reason).toMatch(/^nested deeper than 512 levels at line 1, column \d+$/);
  });

  it('job spec parsing - any edit of a valid spec text parses or is refused with InvalidJobSpecError', () => {
    fc.assert(
      fc.property(
        fc.nat({ max: EXAMPLE_TEXT.length }),
        fc.nat({ max: 4 }),
        fc.string({ maxLength: 4, unit: 'binary' }),
        (at, deleteCount, insert) => {
          const text = EXAMPLE_TEXT.slice(0, at) + insert + EXAMPLE_TEXT.slice(at + deleteCount);
          try {
            parseJobSpec(text);
          } catch (error) {
            expect(error).toBeInstanceOf(InvalidJobSpecError);
            expect((error as InvalidJobSpecError).violations.length).toBeGreaterThan(0);
          }
        },
      ),
      { numRuns: 500 },
    );
  });
});
