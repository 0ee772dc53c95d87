/** A job spec names an optimizer that no registered kernel implements. */
export class UnknownOptimizerError extends Error {
  override readonly name = 'UnknownOptimizerError';

  constructor(
    readonly optimizer: string,
    readonly known: readonly string[],
    options?: ErrorOptions,
  ) {
    super(`unknown optimizer "${optimizer}"; known: ${known.join(', ')}`, options);
  }
}

/** A hyperparameter value is unusable: missing, not a finite number, or out of its range. */
export class InvalidHyperparameterError extends Error {
  override readonly name = 'InvalidHyperparameterError';

  constructor(
    readonly field: string,
    readonly value: unknown,
    reason: string,
    options?: ErrorOptions,
  ) {
    super(`optimizer.${field}${value === undefined ? '' : ` = ${JSON.stringify(value)}`}: ${reason}`, options);
  }
}
