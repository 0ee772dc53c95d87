import { realpath } from 'node:fs/promises';
import { delimiter, dirname, isAbsolute, relative, resolve, sep } from 'node:path';
import { ConfigError } from './errors.js';
import type { EnvField, EnvSpec } from './env-config.js';

/**
 * Where job data sets may be when `TRIBUTARY_DATA_ROOT` is unset: the `data` directory under the
 * service's working directory (where `tributary dataset convert` writes by default) and Debian's
 * `/usr/share/datasets`.
 */
export const DEFAULT_DATA_ROOTS = ['data', '/usr/share/datasets'] as const;
/** Where job outputs may go when `TRIBUTARY_OUTPUT_ROOT` is unset: `out` under the working directory. */
export const DEFAULT_OUTPUT_ROOTS = ['out'] as const;

/** The directories a job spec's paths must stay inside. */
export interface PathRootsConfig {
  /** Roots of `dataset.train` and `dataset.eval` (`TRIBUTARY_DATA_ROOT`, `:`-separated), absolute. */
  dataRoots: string[];
  /** Roots of `output` (`TRIBUTARY_OUTPUT_ROOT`, `:`-separated), absolute. */
  outputRoots: string[];
}

/** A `:`-separated list of directories, each made absolute against the working directory. */
function pathList(defaults: readonly string[]): EnvField<string[]> {
  return {
    describe: `directories separated by "${delimiter}"`,
    read: (name, raw) => {
      const listed = raw === undefined || raw.trim() === '' ? [...defaults] : raw.split(delimiter).map((p) => p.trim());
      if (listed.some((p) => p === '')) throw new ConfigError(name, `${JSON.stringify(raw)} has an empty entry`);
      return listed.map((p) => resolve(p));
    },
  };
}

/** Environment fields of the path roots, read by the master, the trainer and the evaluator. */
export const PATH_ROOTS_CONFIG: EnvSpec<PathRootsConfig> = {
  dataRoots: ['TRIBUTARY_DATA_ROOT', pathList(DEFAULT_DATA_ROOTS)],
  outputRoots: ['TRIBUTARY_OUTPUT_ROOT', pathList(DEFAULT_OUTPUT_ROOTS)],
};

/** A job spec path that resolves outside the roots it must stay in. */
export class PathOutsideRootsError extends Error {
  override readonly name = 'PathOutsideRootsError';

  constructor(
    /** The spec field, e.g. `dataset.train[0]` or `output`. */
    readonly field: string,
    /** The path as the spec gave it. */
    readonly path: string,
    readonly roots: readonly string[],
    /** The variable that sets the roots. */
    readonly variable: string,
  ) {
    super(`${field}: ${JSON.stringify(path)} is outside ${variable} (${roots.join(delimiter)})`);
  }
}

/** The characters that start a glob pattern's dynamic part. */
const GLOB_CHARS = /[*?[\]{}()!+@]/;

/** The part of a glob pattern before its first wildcard: the directory every match lies under. */
export function staticPrefix(pattern: string): string {
  const parts = pattern.split(/[\\/]/);
  const at = parts.findIndex((p) => GLOB_CHARS.test(p));
  return at < 0 ? pattern : parts.slice(0, at).join(sep) || (isAbsolute(pattern) ? sep : '.');
}

/** The real path of `path`, or for one that does not exist yet, its nearest existing ancestor's real path joined with the rest. */
async function realpathOrAncestor(path: string): Promise<string> {
  let existing = path;
  for (;;) {
    try {
      return resolve(await realpath(existing), relative(existing, path));
    } catch (err) {
      const parent = dirname(existing);
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT' || parent === existing) throw err;
      existing = parent;
    }
  }
}

function isInside(path: string, root: string): boolean {
  const rel = relative(root, path);
  return rel === '' || (rel !== '..' && !rel.startsWith(`..${sep}`) && !isAbsolute(rel));
}

/**
 * Refuses a path that resolves outside every root: it is made absolute against `cwd`, then its
 * links are resolved (for a path that does not exist yet, its nearest existing ancestor's) and
 * compared with the roots' real paths. A glob pattern is checked by the directory before its
 * first wildcard; its matches are checked one by one where they are opened. Resolves with the
 * real path. The refusal names the field and the roots, never anything read from the file.
 * @throws PathOutsideRootsError
 */
export async function confinePath(
  path: string,
  roots: readonly string[],
  where: { field: string; variable: string; cwd?: string },
): Promise<string> {
  const absolute = resolve(where.cwd ?? process.cwd(), staticPrefix(path));
  const real = await realpathOrAncestor(absolute);
  const realRoots = await Promise.all(roots.map((r) => realpathOrAncestor(r)));
  if (!realRoots.some((root) => isInside(real, root))) {
    throw new PathOutsideRootsError(where.field, path, roots, where.variable);
  }
  return real;
}

/** Checks `dataset.<kind>` patterns, and files matched from them, against the data roots. */
export async function confineDataPaths(
  kind: 'train' | 'eval',
  paths: readonly string[],
  roots: readonly string[],
  cwd?: string,
): Promise<void> {
  for (const [i, path] of paths.entries()) {
    await confinePath(path, roots, { field: `dataset.${kind}[${i}]`, variable: 'TRIBUTARY_DATA_ROOT', cwd });
  }
}

/** Checks a job's `output` against the output roots. */
export async function confineOutputPath(output: string, roots: readonly string[], cwd?: string): Promise<string> {
  return confinePath(output, roots, { field: 'output', variable: 'TRIBUTARY_OUTPUT_ROOT', cwd });
}
