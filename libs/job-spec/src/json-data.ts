import type { JobSpecViolation } from './errors.js';
import { formatFieldPath, type PathSegment } from './field-path.js';
import { MAX_JSON_NESTING } from './json-text.js';

/** A copy of a value as JSON data, and where the original held something JSON cannot. */
export interface JsonDataCopy {
  /** The copy: only plain objects, arrays, strings, finite numbers, booleans and null. */
  readonly data: unknown;
  /** One violation per value JSON cannot carry; each is `null` in `data`. */
  readonly violations: JobSpecViolation[];
}

/**
 * Copies `input` as JSON.parse would have produced it, so validation can fill in defaults
 * without touching the caller's value, and so a spec built in code means what the same spec
 * sent as JSON means. Object properties that are `undefined` are left out, as JSON.stringify
 * does; anything else JSON cannot carry (a Date, a Map, a class instance, a function, NaN, a
 * circular reference, nesting deeper than {@link MAX_JSON_NESTING}) becomes `null` and a
 * violation naming it.
 */
export function copyAsJsonData(input: unknown): JsonDataCopy {
  const violations: JobSpecViolation[] = [];
  const path: PathSegment[] = [];
  const ancestors = new Set<object>();

  const refuse = (what: string): null => {
    violations.push({ field: formatFieldPath(path), reason: `must be JSON data (got ${what})` });
    return null;
  };
  const copy = (value: unknown): unknown => {
    switch (typeof value) {
      case 'string':
      case 'boolean':
        return value;
      case 'number':
        return Number.isFinite(value) ? value : refuse(String(value));
      case 'object':
        break;
      case 'bigint':
        return refuse('a bigint');
      default:
        return refuse(typeof value === 'undefined' ? 'undefined' : `a ${typeof value}`);
    }
    if (value === null) return null;
    if (ancestors.has(value)) return refuse('a circular reference');
    if (ancestors.size >= MAX_JSON_NESTING) return refuse(`nesting deeper than ${MAX_JSON_NESTING} levels`);
    if (!Array.isArray(value) && !isPlainObject(value)) return refuse(describeObject(value));
    ancestors.add(value);
    try {
      return Array.isArray(value) ? copyArray(value) : copyObject(value as Record<string, unknown>);
    } finally {
      ancestors.delete(value);
    }
  };
  const copyArray = (source: readonly unknown[]): unknown[] => {
    const target: unknown[] = [];
    for (let i = 0; i < source.length; i++) {
      path.push(i);
      target.push(i in source ? copy(source[i]) : refuse('an empty slot'));
      path.pop();
    }
    return target;
  };
  const copyObject = (source: Record<string, unknown>): Record<string, unknown> => {
    const target: Record<string, unknown> = {};
    for (const key of Object.keys(source)) {
      const item = source[key];
      if (item === undefined) continue;
      path.push(key);
      // defineProperty keeps a "__proto__" key an own property instead of a prototype.
      Object.defineProperty(target, key, { value: copy(item), enumerable: true, writable: true, configurable: true });
      path.pop();
    }
    return target;
  };

  return { data: copy(input), violations };
}

/** An object literal's kind of object, from any realm (a vm context, a structured clone). */
function isPlainObject(value: object): boolean {
  const prototype: unknown = Object.getPrototypeOf(value);
  return prototype === null || Object.getPrototypeOf(prototype) === null;
}

function describeObject(value: object): string {
  const name = (value.constructor as { name?: unknown } | undefined)?.name;
  return typeof name === 'string' && name !== '' ? `a ${name}` : 'an object with a prototype';
}
