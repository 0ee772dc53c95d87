import { access, constants } from 'node:fs/promises';
import { MissingDatasetFileError } from './errors.js';

/**
 * Checks that each input file of a conversion can be read, in the order given, before any work
 * starts.
 * @throws MissingDatasetFileError naming the first file that cannot be read.
 */
export async function requireFiles(...files: readonly string[]): Promise<void> {
  for (const file of files) {
    try {
      await access(file, constants.R_OK);
    } catch (err) {
      throw new MissingDatasetFileError(file, { cause: err });
    }
  }
}
