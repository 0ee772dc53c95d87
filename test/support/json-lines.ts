import { existsSync, readFileSync } from 'node:fs';

/** The JSON lines of a file (a job's `events.jsonl` or `metrics.jsonl`), none when it is missing. */
export function jsonLines(file: string): Record<string, unknown>[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}
