/** Errors of the data order. Each names the job concerned. */

/** A job asks for shuffled data but carries no seed to draw the order from. */
export class MissingSeedError extends Error {
  override readonly name = 'MissingSeedError';
  constructor(
    readonly jobId: string,
    options?: ErrorOptions,
  ) {
    super(
      `job ${jobId}: training.shuffle is on but training.seed is missing (the master picks one when a job is submitted)`,
      options,
    );
  }
}
