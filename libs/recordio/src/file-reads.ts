import type { FileHandle } from 'node:fs/promises';

/**
 * Reads `buffer.length` bytes at `position`, repeating short reads, and returns how many bytes
 * were read: fewer than asked only when the file ends first.
 */
export async function readFully(handle: FileHandle, buffer: Uint8Array, position: number): Promise<number> {
  let done = 0;
  while (done < buffer.length) {
    const { bytesRead } = await handle.read(buffer, done, buffer.length - done, position + done);
    if (bytesRead === 0) break;
    done += bytesRead;
  }
  return done;
}
