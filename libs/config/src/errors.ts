/** A configuration value from the environment is missing or malformed. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  /** The environment variable at fault. */
  readonly variable: string;

  constructor(variable: string, reason: string, options?: ErrorOptions) {
    super(`${variable}: ${reason}`, options);
    this.variable = variable;
  }
}

/** Several configuration values are bad at once; `errors` lists each. */
export class ConfigErrors extends Error {
  override readonly name = 'ConfigErrors';

  constructor(readonly errors: ConfigError[]) {
    super(`invalid configuration: ${errors.map((e) => e.message).join('; ')}`);
  }
}
