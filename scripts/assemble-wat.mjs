#!/usr/bin/env node
// Assembles every WebAssembly text file (`*.wat`) under libs/ and services/ into its binary
// (`*.wasm`), written beside the text and beside the compiled JavaScript in dist/, so a kernel's
// loader finds it from the sources (tests) and from the build alike. SIMD128 is on; so are the
// threads proposal's shared memories, which let a memory grow without detaching its views.
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import wabtInit from 'wabt';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

function* watFiles(dir) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory() && entry.name !== 'node_modules') yield* watFiles(path);
    else if (entry.isFile() && entry.name.endsWith('.wat')) yield path;
  }
}

/** Proposals our kernels use; wabt checks them at parsing and again at validation. */
const FEATURES = { simd: true, threads: true };

const wabt = await wabtInit();
let count = 0;
for (const top of ['libs', 'services']) {
  for (const file of watFiles(join(root, top))) {
    const name = relative(root, file);
    let binary;
    try {
      const module = wabt.parseWat(name, readFileSync(file, 'utf8'), FEATURES);
      module.validate(FEATURES);
      binary = module.toBinary({}).buffer;
      module.destroy();
    } catch (err) {
      process.stderr.write(`assemble-wat: ${name}: ${err.message}\n`);
      process.exit(1);
    }
    const out = name.replace(/\.wat$/, '.wasm');
    for (const target of [join(root, out), join(root, 'dist', out)]) {
      mkdirSync(dirname(target), { recursive: true });
      writeFileSync(target, binary);
    }
    count += 1;
  }
}
if (count > 0) process.stdout.write(`assembled ${count} WebAssembly module${count === 1 ? '' : 's'}\n`);
