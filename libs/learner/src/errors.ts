/** Errors raised by the learner library. Each message names the offending value and where. */

/**
 * The first line of an error's message. Reads `message` rather than testing `instanceof Error`:
 * native addons (Dawn, TensorFlow) and test sandboxes throw errors of another realm.
 */
export function firstLineOf(error: unknown): string {
  const message = (error as { message?: unknown } | null)?.message;
  return (typeof message === 'string' ? message : String(error)).split('\n')[0]!;
}

/** No requested TensorFlow.js backend could be initialised. */
export class BackendUnavailableError extends Error {
  override readonly name = 'BackendUnavailableError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** The model part of a learner spec cannot be turned into a model. */
export class ModelSpecError extends Error {
  override readonly name = 'ModelSpecError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** A record's header or size does not match the record layout of the job. */
export class RecordLayoutError extends Error {
  override readonly name = 'RecordLayoutError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** A batch's arrays do not match its size and the feature shape, or a label is out of range. */
export class InvalidBatchError extends Error {
  override readonly name = 'InvalidBatchError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** Parameters handed to a learner do not match its model (name, dtype or shape). */
export class ParamMismatchError extends Error {
  override readonly name = 'ParamMismatchError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** A learner call came in the wrong state (before `initialize`, or `getUpdate` with no training). */
export class LearnerStateError extends Error {
  override readonly name = 'LearnerStateError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** A saved model directory is missing files or holds inconsistent ones. */
export class ModelFilesError extends Error {
  override readonly name = 'ModelFilesError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** The wasm backend's heap cannot grow to hold what a kernel needs. */
export class WasmHeapExhaustedError extends Error {
  override readonly name = 'WasmHeapExhaustedError';
  constructor(
    /** The bytes asked for. */
    readonly bytes: number,
    what: string,
    options?: { cause?: unknown },
  ) {
    super(`the wasm heap has no room for ${bytes} bytes of ${what}`, options);
  }
}
