import { randomBytes } from 'node:crypto';
import { closeSync, fsyncSync, openSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { open, rename, rm } from 'node:fs/promises';
import { dirname } from 'node:path';

/** How {@link writeFileAtomically} and {@link writeFileAtomicallySync} make the new file last. */
export interface AtomicWriteOptions {
  /**
   * Flush the new file to disk before it is renamed into place, and the directory after, so
   * the new content survives the machine losing power, not only the process being killed.
   * Off by default: a reader then still never sees half a file.
   */
  durable?: boolean;
}

/**
 * The temporary a write of `file` goes through: `<file>.tmp-<pid>-<random>`, in the same
 * directory (a rename does not cross file systems) and unique to the writer.
 */
function temporaryName(file: string): string {
  return `${file}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`;
}

/**
 * Replaces `file` with `data`: writes a temporary next to it, then renames it over `file`, so a
 * reader (or a process restarted after a crash) finds either the old file whole or the new one.
 * The temporary is removed when the write fails.
 */
export async function writeFileAtomically(
  file: string,
  data: string | Uint8Array,
  options: AtomicWriteOptions = {},
): Promise<void> {
  const temp = temporaryName(file);
  try {
    const fh = await open(temp, 'w');
    try {
      await fh.writeFile(data);
      if (options.durable) await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(temp, file);
  } catch (err) {
    await rm(temp, { force: true }).catch(() => undefined);
    throw err;
  }
  if (options.durable) {
    const dh = await open(dirname(file), 'r');
    try {
      await dh.sync();
    } finally {
      await dh.close();
    }
  }
}

/** {@link writeFileAtomically}, blocking: for a write that must land before anyone hears of it. */
export function writeFileAtomicallySync(
  file: string,
  data: string | Uint8Array,
  options: AtomicWriteOptions = {},
): void {
  const temp = temporaryName(file);
  try {
    const fd = openSync(temp, 'w');
    try {
      writeFileSync(fd, data);
      if (options.durable) fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(temp, file);
  } catch (err) {
    try {
      rmSync(temp, { force: true });
    } catch {
      // The write's own error is the one worth reporting.
    }
    throw err;
  }
  if (options.durable) {
    const fd = openSync(dirname(file), 'r');
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  }
}
