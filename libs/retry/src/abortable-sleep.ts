import { setTimeout as delay } from 'node:timers/promises';

/** How {@link sleep} holds the process. */
export interface SleepOptions {
  /** Whether the pending wait keeps the process alive, as a plain timer does; true by default. */
  ref?: boolean;
}

/**
 * Waits `ms` milliseconds, or less when `signal` fires. It resolves either way and never rejects
 * on an abort, so a loop that pauses between tries looks at the signal itself afterwards.
 */
export async function sleep(ms: number, signal?: AbortSignal, options: SleepOptions = {}): Promise<void> {
  try {
    await delay(ms, undefined, { signal, ref: options.ref ?? true });
  } catch (err) {
    if ((err as Error).name !== 'AbortError') throw err;
  }
}
