import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

import fc from 'fast-check';

import { InvalidJobSpecError } from './errors.js';
import type { PathSegment } from './field-path.js';
import { validateJobSpec } from './validate-job-spec.js';

const EXAMPLES = ['fashion-mnist-mlp', 'fashion-mnist-cnn', 'tiny-regression'].map(
  (name) =>
    JSON.parse(
      readFileSync(fileURLToPath(new URL(`../../../examples/${name}.json`, import.meta.url)), 'utf8'),
    ) as Record<string, unknown>,
);

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null) return false;
  const prototype: unknown = Object.getPrototypeOf(value);
  return prototype === null || Object.getPrototypeOf(prototype) === null;
}

/** Every path to a value inside the arrays and plain objects of `value`, the root excluded. */
function pathsIn(value: unknown, prefix: PathSegment[] = [], seen = new Set<unknown>()): PathSegment[][] {
  if (seen.has(value)) return [];
  seen.add(value);
  if (Array.isArray(value)) {
    return value.flatMap((item, i) => [[...prefix, i], ...pathsIn(item, [...prefix, i], seen)]);
  }
  if (isPlainObject(value)) {
    return Object.entries(value).flatMap(([key, item]) => [[...prefix, key], ...pathsIn(item, [...prefix, key], seen)]);
  }
  return [];
}

type Mutation =
  | { kind: 'replace'; pick: number; value: unknown }
  | { kind: 'remove'; pick: number }
  | { kind: 'add'; pick: number; key: string; value: unknown };

const FIELD_NAMES = [
  'preset',
  'topology',
  'type',
  'momentum',
  'beta1',
  'filters',
  'hiddenUnits',
  'numClasses',
  'metric',
  'target',
  'min',
  'max',
  'everySteps',
  'seed',
  'shuffle',
  'shuffleBuffer',
  'dtype',
  '__proto__',
  'constructor',
  '$schema',
];
const WORDS = [
  'sgd',
  'momentum',
  'adam',
  'mlp',
  'cnn',
  'relu',
  'accuracy',
  'loss',
  'sync',
  'async',
  'uint8',
  'float32',
  'int32',
  'float16',
  'bfloat16',
];

const anyValue = fc.oneof(
  fc.anything({
    withBigInt: true,
    withBoxedValues: true,
    withDate: true,
    withMap: true,
    withSet: true,
    withNullPrototype: true,
    withSparseArray: true,
    withTypedArray: true,
    withObjectString: true,
    maxDepth: 3,
  }),
  fc.constantFrom(...WORDS),
  fc.integer({ min: -3, max: 100 }),
  fc.double(),
  fc.array(fc.integer({ min: 0, max: 40 }), { maxLength: 4 }),
  fc.constant(null).map(() => ({ class_name: 'Sequential', config: { layers: [] } })),
);

const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({ kind: fc.constant('replace' as const), pick: fc.nat(), value: anyValue }),
  fc.record({ kind: fc.constant('remove' as const), pick: fc.nat() }),
  fc.record({
    kind: fc.constant('add' as const),
    pick: fc.nat(),
    key: fc.oneof(fc.constantFrom(...FIELD_NAMES), fc.string({ maxLength: 6 })),
    value: anyValue,
  }),
);

function apply(spec: Record<string, unknown>, change: Mutation): void {
  const paths = pathsIn(spec);
  if (change.kind === 'add') {
    const containers = [[], ...paths].filter((p) => {
      return isPlainObject(valueAt(spec, p));
    });
    const target = valueAt(spec, containers[change.pick % containers.length]!) as Record<string, unknown>;
    Object.defineProperty(target, change.key, {
      value: change.value,
      enumerable: true,
      writable: true,
      configurable: true,
    });
    return;
  }
  if (paths.length === 0) return;
  const path = paths[change.pick % paths.length]!;
  const parent = valueAt(spec, path.slice(0, -1)) as Record<PathSegment, unknown> | unknown[];
  const last = path[path.length - 1]!;
  if (change.kind === 'replace') (parent as Record<PathSegment, unknown>)[last] = change.value;
  else if (Array.isArray(parent)) parent.splice(last as number, 1);
  else delete parent[last];
}

function valueAt(root: unknown, path: readonly PathSegment[]): unknown {
  return path.reduce<unknown>((node, key) => (node as Record<PathSegment, unknown>)[key], root);
}

describe('job spec mutations', () => {
  it('job spec mutations - a mutated valid spec validates or is refused with InvalidJobSpecError', () => {
    let accepted = 0;
    let refused = 0;
    fc.assert(
      fc.property(
        fc.nat({ max: EXAMPLES.length - 1 }),
        fc.array(mutation, { minLength: 1, maxLength: 3 }),
        (which, changes) => {
          const input = structuredClone(EXAMPLES[which]!);
          for (const change of changes) apply(input, change);
          let spec;
          try {
            spec = validateJobSpec(input);
          } catch (error) {
            expect(error).toBeInstanceOf(InvalidJobSpecError);
            const { violations, message } = error as InvalidJobSpecError;
            expect(violations.length).toBeGreaterThan(0);
            for (const v of violations) {
              expect(v.field).not.toBe('');
              expect(v.reason).not.toBe('');
              expect(message).toContain(`${v.field}: ${v.reason}`);
            }
            refused++;
            return;
          }
          accepted++;
          expect(validateJobSpec(spec)).toEqual(spec);
          expect(JSON.parse(JSON.stringify(spec))).toEqual(spec);
        },
      ),
      { numRuns: 1000 },
    );
    expect(accepted).toBeGreaterThan(0);
    expect(refused).toBeGreaterThan(0);
  });
});
