import { createRequire } from 'node:module';
import { firstLineOf } from './errors.js';

const MODULE_NOT_FOUND_CODES = new Set(['ERR_MODULE_NOT_FOUND', 'MODULE_NOT_FOUND']);

/**
 * Loads a package by name at run time, so that an optional package may be absent: the name is
 * a value, not a literal, so neither the compiler nor a bundler needs the package present.
 */
export async function importOptional(pkg: string): Promise<unknown> {
  return import(pkg);
}

/** Whether `pkg` can be resolved from this library, without loading it. */
export function isResolvable(pkg: string): boolean {
  try {
    createRequire(import.meta.url).resolve(pkg);
    return true;
  } catch {
    return false;
  }
}

/**
 * Why importing `pkg` failed, in one line: `not installed` when the package itself is missing,
 * else the first line of the error (a native binary that does not load, a missing dependency).
 */
export function importFailure(pkg: string, cause: unknown): string {
  const code = (cause as { code?: unknown } | null)?.code;
  const line = firstLineOf(cause);
  if (typeof code === 'string' && MODULE_NOT_FOUND_CODES.has(code) && line.includes(`'${pkg}'`)) return 'not installed';
  return line;
}
