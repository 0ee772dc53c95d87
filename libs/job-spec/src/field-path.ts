import { ROOT_FIELD } from './errors.js';

/** One step into a JSON document: an object key or an array index. */
export type PathSegment = string | number;

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

/**
 * Renders a path the way users write it in JavaScript: `optimizer.learningRate`,
 * `dataset.train[0]`, `model.topology["odd key"]`; the empty path is `(root)`.
 */
export function formatFieldPath(segments: readonly PathSegment[]): string {
  if (segments.length === 0) return ROOT_FIELD;
  let out = '';
  for (const segment of segments) {
    if (typeof segment === 'number') out += `[${segment}]`;
    else if (IDENTIFIER.test(segment)) out += out === '' ? segment : `.${segment}`;
    else out += `[${JSON.stringify(segment)}]`;
  }
  return out;
}

/**
 * Splits a JSON pointer (as in ajv's `instancePath`) into segments, turning a key into an index
 * where the document has an array at that point.
 */
export function pointerSegments(pointer: string, document: unknown): PathSegment[] {
  if (pointer === '') return [];
  const segments: PathSegment[] = [];
  let node: unknown = document;
  for (const raw of pointer.slice(1).split('/')) {
    const key = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (Array.isArray(node) && /^(0|[1-9][0-9]*)$/.test(key)) {
      segments.push(Number(key));
      node = node[Number(key)];
    } else {
      segments.push(key);
      node = isRecord(node) && Object.hasOwn(node, key) ? node[key] : undefined;
    }
  }
  return segments;
}

/** True for a non-null, non-array object. */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
