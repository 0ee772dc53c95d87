import { InvalidTaskSizeError } from './errors.js';

/** Where one RecordIO chunk lies, as a trainer reads it with `readChunkAt(file, offset)`. */
export interface ChunkRef {
  file: string;
  offset: number;
  numRecords: number;
}

/** One task: a run of consecutive chunks of the global chunk list. Task ids are stable. */
export interface PlannedTask {
  taskId: number;
  chunks: ChunkRef[];
  /** Records in all of the task's chunks. */
  records: number;
}

/**
 * Groups the global chunk list into tasks of `chunksPerTask` consecutive chunks, in order; the
 * last task may hold fewer. Task ids run from 0 to T-1, so the same files always give the same
 * plan.
 * @throws InvalidTaskSizeError when `chunksPerTask` is not a positive integer.
 */
export function planTasks(chunks: readonly ChunkRef[], chunksPerTask: number): PlannedTask[] {
  if (!Number.isInteger(chunksPerTask) || chunksPerTask < 1) throw new InvalidTaskSizeError(chunksPerTask);
  const tasks: PlannedTask[] = [];
  for (let start = 0; start < chunks.length; start += chunksPerTask) {
    const group = chunks
      .slice(start, start + chunksPerTask)
      .map(({ file, offset, numRecords }) => ({ file, offset, numRecords }));
    tasks.push({ taskId: tasks.length, chunks: group, records: group.reduce((sum, c) => sum + c.numRecords, 0) });
  }
  return tasks;
}
