import { confinePath } from '#libs/config';
import { readChunkAt } from '#libs/recordio';
import type { ChunkSource } from './minibatch-reader.js';

/**
 * Reads chunks like `readChunkAt`, but only from files inside the data roots, links resolved:
 * the master checked the spec where it runs, and this machine may see other files at those paths.
 */
export function confinedChunkSource(dataRoots: readonly string[]): ChunkSource {
  return async (file, offset) => {
    await confinePath(file, dataRoots, { field: 'dataset.train', variable: 'TRIBUTARY_DATA_ROOT' });
    return readChunkAt(file, offset);
  };
}
