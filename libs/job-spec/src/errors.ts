/** The `field` of a violation that concerns the whole document (bad JSON, not an object). */
export const ROOT_FIELD = '(root)';

/** One reason a job spec is refused. */
export interface JobSpecViolation {
  /** Where: a path such as `optimizer.learningRate` or `dataset.train[0]`, or `(root)`. */
  readonly field: string;
  /** What is wrong, e.g. `must be > 0` or `unknown field`. */
  readonly reason: string;
}

const MAX_ID_IN_MESSAGE_CHARS = 80;

/** A job spec was refused; `violations` lists every problem found, not just the first. */
export class InvalidJobSpecError extends Error {
  override readonly name = 'InvalidJobSpecError';
  /** The spec's `id` when it had a string one (valid or not), for reporting. */
  readonly jobId: string | undefined;
  /** Every violation, in document order as far as the checks allow. */
  readonly violations: readonly JobSpecViolation[];

  constructor(violations: readonly JobSpecViolation[], options?: { jobId?: string; cause?: unknown }) {
    super(describeViolations(violations, options?.jobId), { cause: options?.cause });
    this.jobId = options?.jobId;
    this.violations = violations;
  }
}

function describeViolations(violations: readonly JobSpecViolation[], jobId: string | undefined): string {
  const subject =
    jobId === undefined
      ? 'invalid job spec'
      : `invalid job spec ${JSON.stringify(jobId.length > MAX_ID_IN_MESSAGE_CHARS ? `${jobId.slice(0, MAX_ID_IN_MESSAGE_CHARS)}...` : jobId)}`;
  const list = violations.map((v) => `${v.field}: ${v.reason}`).join('; ');
  return `${subject}: ${list}`;
}

/** The JSON Schema file could not be found or read: a broken installation, not a bad spec. */
export class JobSchemaUnavailableError extends Error {
  override readonly name = 'JobSchemaUnavailableError';
}
