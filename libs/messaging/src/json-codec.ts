/** A message on a subject could not be decoded as the JSON we expect. */
export class MalformedMessageError extends Error {
  override readonly name = 'MalformedMessageError';

  constructor(
    readonly subject: string,
    reason: string,
    options?: ErrorOptions,
  ) {
    super(`malformed message on ${subject}: ${reason}`, options);
  }
}

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true });

/** Encodes a value as UTF-8 JSON. */
export function encodeJson(value: unknown): Uint8Array {
  return encoder.encode(JSON.stringify(value));
}

/**
 * Decodes UTF-8 JSON from `data` received on `subject`, and checks it is an object; anything
 * else is a `MalformedMessageError` naming the subject.
 */
export function decodeJsonObject(subject: string, data: Uint8Array): Record<string, unknown> {
  let text: string;
  try {
    text = decoder.decode(data);
  } catch (cause) {
    throw new MalformedMessageError(subject, 'not UTF-8', { cause });
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (cause) {
    const preview = text.length > 60 ? `${text.slice(0, 60)}...` : text;
    throw new MalformedMessageError(subject, `not JSON (${(cause as Error).message}): ${JSON.stringify(preview)}`, {
      cause,
    });
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new MalformedMessageError(
      subject,
      `expected a JSON object, got ${Array.isArray(value) ? 'array' : typeof value}`,
    );
  }
  return value as Record<string, unknown>;
}

/** Reads a required string field, or throws naming it. */
export function stringField(subject: string, obj: Record<string, unknown>, field: string): string {
  const v = obj[field];
  if (typeof v !== 'string' || v === '')
    throw new MalformedMessageError(subject, `${field}: expected a non-empty string`);
  return v;
}

/** Reads a required finite number field, or throws naming it. */
export function numberField(subject: string, obj: Record<string, unknown>, field: string): number {
  const v = obj[field];
  if (typeof v !== 'number' || !Number.isFinite(v))
    throw new MalformedMessageError(subject, `${field}: expected a number`);
  return v;
}
