/** Waiting on work that cannot be cancelled, without waiting past an abort. */

/** Thrown by `unlessAborted` when the signal fires first. */
export class InterruptedError extends Error {
  override readonly name = 'InterruptedError';
  constructor() {
    super('interrupted');
  }
}

/**
 * Settles as `promise` does, or rejects with `InterruptedError` as soon as `signal` fires; the
 * promise then runs on unobserved (its rejection is swallowed).
 */
export function unlessAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  promise.catch(() => undefined);
  if (signal.aborted) return Promise.reject(new InterruptedError());
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(new InterruptedError());
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}

/** A signal that fires `delayMs` after `signal` fires (a grace period that starts with it). */
export function afterAbort(signal: AbortSignal, delayMs: number): AbortSignal {
  const later = new AbortController();
  const start = () => setTimeout(() => later.abort(), delayMs).unref();
  if (signal.aborted) start();
  else signal.addEventListener('abort', start, { once: true });
  return later.signal;
}
