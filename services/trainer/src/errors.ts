/** Errors of the trainer. Each names the job, task, file or offset concerned. */

/** A chunk of a task could not be read or decoded; the task is reported failed with this message. */
export class TaskDataError extends Error {
  override readonly name = 'TaskDataError';
  constructor(
    readonly file: string,
    readonly offset: number,
    reason: string,
    options?: ErrorOptions,
  ) {
    super(`${file}: chunk at byte ${offset}: ${reason}`, options);
  }
}

/** The parameter servers refused a minibatch's gradients more than `maxGradientRetries` times. */
export class GradientRetriesExhaustedError extends Error {
  override readonly name = 'GradientRetriesExhaustedError';
  constructor(
    readonly refusals: number,
    readonly maxGradientRetries: number,
    options?: ErrorOptions,
  ) {
    super(
      `gradients refused ${refusals} times for one minibatch (training.maxGradientRetries is ${maxGradientRetries})` +
        (options?.cause instanceof Error ? `: ${options.cause.message}` : ''),
      options,
    );
  }
}

/** The parameter servers stayed unreachable longer than the trainer's outage budget. */
export class PserverOutageError extends Error {
  override readonly name = 'PserverOutageError';
  constructor(
    readonly outageMs: number,
    readonly budgetMs: number,
    options?: ErrorOptions,
  ) {
    super(
      `parameter servers unreachable for ${outageMs} ms (budget ${budgetMs} ms)` +
        (options?.cause instanceof Error ? `: ${options.cause.message}` : ''),
      options,
    );
  }
}

/**
 * The learner could not be set up for a job (its model cannot be built): the job, not the
 * trainer, is at fault, so the trainer reports it to the master and turns to other jobs.
 */
export class JobSetupError extends Error {
  override readonly name = 'JobSetupError';
  constructor(
    readonly jobId: string,
    options: { cause: unknown },
  ) {
    super(
      `job ${jobId}: the model cannot be built: ${(options.cause as Error)?.message ?? String(options.cause)}`,
      options,
    );
  }
}
