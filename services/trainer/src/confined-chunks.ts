import { confinePath } from '#libs/config';
import { readChunkAt } from '#libs/recordio';
import type { ChunkSource } from './minibatch-reader.js';

/**
 * Reads chunks like `readChunkAt`, but only from files inside the data roots, links resolved:
 * the master checked the spec where it runs, and this machine may see other files at those paths.
 * Each file is checked once (a task reads many chunks of the same few files); a refused file is
 * checked again when asked again.
 */
export function confinedChunkSource(dataRoots: readonly string[]): ChunkSource {
  const confined = new Map<string, Promise<unknown>>();
  const check = (file: string): Promise<unknown> => {
    let checked = confined.get(file);
    if (!checked) {
      checked = confinePath(file, dataRoots, { field: 'dataset.train', variable: 'TRIBUTARY_DATA_ROOT' });
      checked.catch(() => confined.delete(file));
      confined.set(file, checked);
    }
    return checked;
  };
  return async (file, offset) => {
    await check(file);
    return readChunkAt(file, offset);
  };
}
