import { sleep } from './abortable-sleep.js';
import { retryWithBackoff } from './retry-with-backoff.js';

describe('retry', () => {
  it('sleep - resolves, not rejects, when the signal fires', async () => {
    const stop = new AbortController();
    const waiting = sleep(60_000, stop.signal);
    stop.abort();
    await expect(waiting).resolves.toBeUndefined();
    await expect(sleep(60_000, AbortSignal.abort())).resolves.toBeUndefined();
  });

  it('retry with backoff - doubles the pause up to the cap and returns the first success', async () => {
    const delays: number[] = [];
    const result = await retryWithBackoff(
      async (attempt) => {
        if (attempt < 5) throw new Error(`try ${attempt}`);
        return attempt;
      },
      {
        initialDelayMs: 1,
        maxDelayMs: 4,
        shouldRetry: (_err, delayMs) => {
          delays.push(delayMs);
          return true;
        },
      },
    );
    expect(result).toBe(5);
    expect(delays).toEqual([1, 2, 4, 4]);
  });

  it('retry with backoff - rethrows the error shouldRetry declines, or throws what it throws', async () => {
    const declined = new Error('final');
    await expect(
      retryWithBackoff(() => Promise.reject(declined), { initialDelayMs: 1, maxDelayMs: 1, shouldRetry: () => false }),
    ).rejects.toBe(declined);
    const budget = new Error('budget spent');
    await expect(
      retryWithBackoff(() => Promise.reject(new Error('x')), {
        initialDelayMs: 1,
        maxDelayMs: 1,
        shouldRetry: () => {
          throw budget;
        },
      }),
    ).rejects.toBe(budget);
  });

  it('retry with backoff - pauseFirst waits the first pause before the first try', async () => {
    const delays: number[] = [];
    let tries = 0;
    await retryWithBackoff(
      async () => {
        tries += 1;
        if (tries < 3) throw new Error('not yet');
      },
      {
        initialDelayMs: 1,
        maxDelayMs: 100,
        pauseFirst: true,
        shouldRetry: (_err, delayMs) => {
          delays.push(delayMs);
          return true;
        },
      },
    );
    expect(delays).toEqual([2, 4]);
  });
});
