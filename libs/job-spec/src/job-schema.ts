import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { JobSchemaUnavailableError } from './errors.js';

/** Where the job spec's JSON Schema lives, relative to the repository root. */
export const JOB_SCHEMA_RELATIVE_PATH = join('proto', 'job.schema.json');

let cachedPath: string | undefined;

/**
 * Absolute path of `proto/job.schema.json`: found by walking up from this module to the first
 * directory holding a package.json and that file, so it works from `libs/job-spec/src` and from
 * `dist/libs/job-spec/src` alike.
 * @throws JobSchemaUnavailableError when no such directory exists.
 */
export function jobSchemaPath(): string {
  if (cachedPath !== undefined) return cachedPath;
  const start = dirname(fileURLToPath(import.meta.url));
  for (let dir = start; ; dir = dirname(dir)) {
    const candidate = join(dir, JOB_SCHEMA_RELATIVE_PATH);
    if (existsSync(join(dir, 'package.json')) && existsSync(candidate)) {
      cachedPath = candidate;
      return candidate;
    }
    if (dirname(dir) === dir) break;
  }
  throw new JobSchemaUnavailableError(`cannot find ${JOB_SCHEMA_RELATIVE_PATH} in any package root above ${start}`);
}

/**
 * The job spec's JSON Schema, freshly parsed (callers may keep or change their copy).
 * @throws JobSchemaUnavailableError when the file is missing or not JSON.
 */
export function loadJobSchema(): Record<string, unknown> {
  const path = jobSchemaPath();
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
  } catch (cause) {
    throw new JobSchemaUnavailableError(`cannot read the job spec schema ${path}`, { cause });
  }
}
