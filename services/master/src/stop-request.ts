import type { StopReason, StopRequest } from '#libs/messaging';

const REASONS = new Set<StopReason>(['target', 'patience', 'maxEpochs', 'maxSeconds', 'manual']);
const MAX_DETAIL_CHARS = 200;
const decoder = new TextDecoder('utf-8', { fatal: false });

function preview(text: string): string {
  return JSON.stringify(text.length > 60 ? `${text.slice(0, 60)}...` : text);
}

/**
 * Reads the body of a stop message. It never refuses: a stop is always honoured, so an empty
 * body is a manual stop, and a body that is not a JSON object or names no known reason is a
 * manual stop whose detail says what was wrong with it.
 */
export function parseStopRequest(data: Uint8Array): StopRequest {
  const text = decoder.decode(data).trim();
  if (text === '') return { reason: 'manual' };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { reason: 'manual', detail: `stop body was not JSON: ${preview(text)}` };
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    return { reason: 'manual', detail: `stop body was not a JSON object: ${preview(text)}` };
  }
  const obj = value as Record<string, unknown>;
  const detail = typeof obj['detail'] === 'string' ? obj['detail'].slice(0, MAX_DETAIL_CHARS) : undefined;
  const reason = obj['reason'];
  if (reason === undefined) return detail === undefined ? { reason: 'manual' } : { reason: 'manual', detail };
  if (typeof reason !== 'string' || !REASONS.has(reason as StopReason)) {
    const why = `unknown stop reason ${JSON.stringify(reason)}`;
    return { reason: 'manual', detail: detail === undefined ? why : `${why}; ${detail}` };
  }
  return detail === undefined ? { reason: reason as StopReason } : { reason: reason as StopReason, detail };
}
