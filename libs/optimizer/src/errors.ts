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

/** A hyperparameter value is unusable: not a finite number, or out of its range. */
export class InvalidHyperparameterError extends Error {
  override readonly name = 'InvalidHyperparameterError';

  constructor(
    readonly field: string,
    readonly value: unknown,
    reason: string,
    options?: ErrorOptions,
  ) {
    super(`optimizer.${field} = ${JSON.stringify(value)}: ${reason}`, options);
  }
}

/** A kernel choice (`TRIBUTARY_KERNELS`) is not one of `auto`, `wasm-simd` and `js`. */
export class InvalidKernelChoiceError extends Error {
  override readonly name = 'InvalidKernelChoiceError';

  constructor(
    /** Where the value came from. */
    readonly source: string,
    readonly value: string,
    options?: ErrorOptions,
  ) {
    super(`${source} = ${JSON.stringify(value)}: expected auto, wasm-simd or js`, options);
  }
}
