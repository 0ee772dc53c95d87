import { PROGRESS_INTERVAL_RECORDS } from './defaults.js';

/** Called by the converters as records are written: how many so far, out of how many. */
export type ProgressCallback = (recordsDone: number, total: number) => void;

/** Calls `onProgress` every {@link PROGRESS_INTERVAL_RECORDS} records and on the last one. */
export function progressTicker(total: number, onProgress: ProgressCallback | undefined): (done: number) => void {
  if (onProgress === undefined) return () => {};
  return (done) => {
    if (done === total || done % PROGRESS_INTERVAL_RECORDS === 0) onProgress(done, total);
  };
}
