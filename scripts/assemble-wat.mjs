#!/usr/bin/env node
// Assembles every WebAssembly text file (`*.wat`) under libs/ and services/ into its binary
// (`*.wasm`), written beside the text and beside the compiled JavaScript in dist/, so a kernel's
// loader finds it from the sources (tests) and from the build alike. SIMD128 is on; so are the
// threads proposal's shared memories, which let a memory grow without detaching its views.
// A module that imports a shared memory (the kernel heap's) is also assembled importing a plain
// one, as `NAME.unshared.wasm`, so the same kernel can run on the wasm backend's memory too.
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

/** The import of a shared memory, and what replaces it in the unshared twin: any plain memory. */
const SHARED_MEMORY_IMPORT = /\(import "env" "memory" \(memory [0-9 ]+shared\)\)/;
const PLAIN_MEMORY_IMPORT = '(import "env" "memory" (memory 0))';

const wabt = await wabtInit();
let count = 0;
for (const top of ['libs', 'services']) {
  for (const file of watFiles(join(root, top))) {
    const name = relative(root, file);
    const text = readFileSync(file, 'utf8');
    const variants = [[name.replace(/\.wat$/, '.wasm'), text]];
    const unshared = text.replace(SHARED_MEMORY_IMPORT, PLAIN_MEMORY_IMPORT);
    if (unshared !== text) variants.push([name.replace(/\.wat$/, '.unshared.wasm'), unshared]);
    for (const [out, source] of variants) {
      let binary;
      try {
        const module = wabt.parseWat(name, source, FEATURES);
        module.validate(FEATURES);
        binary = module.toBinary({}).buffer;
        module.destroy();
      } catch (err) {
        process.stderr.write(`assemble-wat: ${out}: ${err.message}\n`);
        process.exit(1);
      }
      for (const target of [join(root, out), join(root, 'dist', out)]) {
        mkdirSync(dirname(target), { recursive: true });
        writeFileSync(target, binary);
      }
      count += 1;
    }
  }
}
if (count > 0) process.stdout.write(`assembled ${count} WebAssembly module${count === 1 ? '' : 's'}\n`);
