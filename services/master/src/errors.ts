/** Errors of the master, grouped here so callers can tell them apart by class. */

/** A job's training files hold no chunk, so there is nothing to cut into tasks. */
export class EmptyDatasetError extends Error {
  override readonly name = 'EmptyDatasetError';

  constructor(
    readonly jobId: string,
    options?: ErrorOptions,
  ) {
    super(`job ${jobId}: dataset.train holds no RecordIO chunk`, options);
  }
}

/** `chunksPerTask` is not a positive integer. */
export class InvalidTaskSizeError extends Error {
  override readonly name = 'InvalidTaskSizeError';

  constructor(
    readonly chunksPerTask: number,
    options?: ErrorOptions,
  ) {
    super(`chunksPerTask must be a positive integer, got ${chunksPerTask}`, options);
  }
}

/** A write to Redis was refused because this master no longer holds the leader lease. */
export class FencedWriteError extends Error {
  override readonly name = 'FencedWriteError';

  constructor(
    readonly jobId: string,
    readonly fence: string,
    options?: ErrorOptions,
  ) {
    super(`job ${jobId}: write refused, leader fence ${fence} is no longer current`, options);
  }
}

/**
 * Redis holds a different count of a job's writes than the master made: it came back from a
 * crash without writes it had answered (or something else wrote the job).
 */
export class LostWritesError extends Error {
  override readonly name = 'LostWritesError';

  constructor(
    readonly jobId: string,
    readonly expected: number,
    readonly found: number,
    options?: ErrorOptions,
  ) {
    super(`job ${jobId}: Redis holds ${found} writes of the job, the master made ${expected}`, options);
  }
}

/** The state of a job kept in Redis cannot be read back (missing or malformed fields). */
export class CorruptJobStateError extends Error {
  override readonly name = 'CorruptJobStateError';

  constructor(
    readonly jobId: string,
    reason: string,
    options?: ErrorOptions,
  ) {
    super(`job ${jobId}: stored state is unreadable: ${reason}`, options);
  }
}

/** Something only the leader does was asked of this master between its terms. */
export class NotInOfficeError extends Error {
  override readonly name = 'NotInOfficeError';

  constructor(
    readonly action: string,
    options?: ErrorOptions,
  ) {
    super(`${action}: this master is not in office`, options);
  }
}
