#!/usr/bin/env node
// Entry point of the `tributary` CLI: builds the TypeScript sources when the compiled output is
// missing or older than them, then runs dist/cli/main.js.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const entry = join(root, 'dist', 'cli', 'main.js');
const stamp = join(root, 'dist', '.tsbuildinfo');
const SOURCE_DIRS = ['cli', 'libs', 'services', 'proto', 'bench'];

function newestSourceMs(dir) {
  let newest = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) newest = Math.max(newest, newestSourceMs(p));
    else if (e.name.endsWith('.ts') || e.name.endsWith('.json')) newest = Math.max(newest, statSync(p).mtimeMs);
  }
  return newest;
}

function stale() {
  if (!existsSync(entry) || !existsSync(stamp)) return true;
  const built = statSync(stamp).mtimeMs;
  return SOURCE_DIRS.some((d) => existsSync(join(root, d)) && newestSourceMs(join(root, d)) > built);
}

if (stale()) {
  process.stderr.write('tributary: building...\n');
  try {
    execFileSync(
      process.execPath,
      [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(root, 'tsconfig.build.json')],
      {
        stdio: 'inherit',
        cwd: root,
      },
    );
  } catch {
    process.stderr.write('tributary: the build failed; see the errors above\n');
    process.exit(1);
  }
}

await import(pathToFileURL(entry).href);
