/**
 * Errors raised while encoding, decoding and converting datasets. Each message names the
 * offending value and where it came from (file, line, column, byte offset).
 */

/** A record does not hold a well-formed example (bad version, unknown dtype, wrong length). */
export class MalformedRecordError extends Error {
  override readonly name = 'MalformedRecordError';
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
  }
}

/** An example handed to the encoder is inconsistent (shape does not match the features, label out of range). */
export class InvalidExampleError extends Error {
  override readonly name = 'InvalidExampleError';
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
  }
}

/** An IDX file is not well formed; the message names the file and what is wrong. */
export class IdxFormatError extends Error {
  override readonly name = 'IdxFormatError';
  constructor(
    readonly file: string,
    detail: string,
    options?: ErrorOptions,
  ) {
    super(`${file}: ${detail}`, options);
  }
}

/** A CSV file cannot be converted; the message names the file, line and column where known. */
export class CsvFormatError extends Error {
  override readonly name = 'CsvFormatError';
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
  }
}

/** Two inputs that must agree do not (image and label counts, shapes across records). */
export class DatasetMismatchError extends Error {
  override readonly name = 'DatasetMismatchError';
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
  }
}

/** A file a converter needs is not there, or cannot be read (the file system error is the `cause`). */
export class MissingDatasetFileError extends Error {
  override readonly name = 'MissingDatasetFileError';
  constructor(
    readonly file: string,
    options?: ErrorOptions,
  ) {
    const code = (options?.cause as NodeJS.ErrnoException | undefined)?.code;
    super(
      `dataset file ${file} ${code === undefined || code === 'ENOENT' ? 'is missing' : `cannot be read (${code})`}`,
      options,
    );
  }
}

/** A converter option is out of range (chunk size, chunks per file). */
export class InvalidConvertOptionError extends Error {
  override readonly name = 'InvalidConvertOptionError';
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
  }
}
