import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The Tributary checkout this CLI runs from (the folder holding its package.json). */
export function repoRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json')) || !existsSync(join(dir, 'services'))) {
    const parent = dirname(dir);
    if (parent === dir) throw new Error('cannot find the Tributary checkout (package.json with services/)');
    dir = parent;
  }
  return dir;
}
