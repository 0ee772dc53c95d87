/**
 * What both ends of the parameter server protocol agree on about failures: the error a tensor
 * that cannot be decoded raises, and the trailing metadata keys a shard's refusal carries.
 */

/** Trailing metadata key carrying the shard's version when a push is refused for its version. */
export const SHARD_VERSION_METADATA_KEY = 'tributary-shard-version';
/** Trailing metadata key carrying the machine-readable reason of a refusal. */
export const ERROR_REASON_METADATA_KEY = 'tributary-error-reason';

/** A tensor message or part is inconsistent: bad dtype or shape, a part out of place, too large. */
export class MalformedTensorError extends Error {
  override readonly name = 'MalformedTensorError';

  constructor(
    /** The tensor's name as sent (may be empty). */
    readonly tensor: string,
    reason: string,
    options?: ErrorOptions,
  ) {
    super(`tensor "${tensor}": ${reason}`, options);
  }
}
