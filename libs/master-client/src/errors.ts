/** Errors raised by the master client. Each names the job and what was asked. */

/** The master did not answer a request (no responder, or no reply in time). */
export class MasterUnavailableError extends Error {
  override readonly name = 'MasterUnavailableError';
  constructor(
    readonly subject: string,
    reason: string,
    options?: ErrorOptions,
  ) {
    super(`no reply from the master on ${subject}: ${reason}`, options);
  }
}

/** The master does not know the job a request named. */
export class JobUnknownToMasterError extends Error {
  override readonly name = 'JobUnknownToMasterError';
  constructor(
    readonly jobId: string,
    options?: ErrorOptions,
  ) {
    super(`unknown job ${jobId}`, options);
  }
}

/**
 * A request that retries until the master answers was given up: its abort signal fired or its
 * time budget ran out. `cause` is the error of the last attempt, if any.
 */
export class RequestAbortedError extends Error {
  override readonly name = 'RequestAbortedError';
  constructor(
    readonly subject: string,
    readonly attempts: number,
    why: 'aborted' | 'budget spent',
    options?: ErrorOptions,
  ) {
    super(`gave up on ${subject} after ${attempts} unanswered attempt(s): ${why}`, options);
  }
}

/** A job id that cannot be used in a subject (see `JOB_ID_PATTERN`). */
export class InvalidJobIdError extends Error {
  override readonly name = 'InvalidJobIdError';
  constructor(readonly jobId: string) {
    super(`invalid job id ${JSON.stringify(jobId)}: expected 1 to 63 characters of a-z, 0-9, _ and -`);
  }
}
