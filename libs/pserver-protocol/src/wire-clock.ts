import { performance } from 'node:perf_hooks';

/** Milliseconds a process spent encoding tensor messages and decoding them, since it started. */
export interface WireTimes {
  encodeMs: number;
  decodeMs: number;
}

/**
 * Where a process's time on the tensor codec goes: encoding (tensors into wire bytes: float16 and
 * bfloat16 conversion, then each message's serialization) and decoding (each message's parsing,
 * the assembly of parts into tensors, float16 and bfloat16 conversion back). Step breakdowns
 * read it before and after a network call to tell the codec's share of the call from the wait on
 * the network and on the other side (see the trainer's `StepPhases` and the pserver's step
 * phases). Work timed inside other timed work counts once.
 */
export class WireClock {
  private encodeMs = 0;
  private decodeMs = 0;
  private depth = 0;

  constructor(private readonly now: () => number = () => performance.now()) {}

  /** Runs `fn`, counting its time as encoding. */
  encoding<T>(fn: () => T): T {
    return this.timed(fn, (ms) => (this.encodeMs += ms));
  }

  /** Runs `fn`, counting its time as decoding. */
  decoding<T>(fn: () => T): T {
    return this.timed(fn, (ms) => (this.decodeMs += ms));
  }

  /** The totals so far. */
  read(): WireTimes {
    return { encodeMs: this.encodeMs, decodeMs: this.decodeMs };
  }

  private timed<T>(fn: () => T, count: (ms: number) => void): T {
    if (this.depth > 0) return fn();
    this.depth += 1;
    const start = this.now();
    try {
      return fn();
    } finally {
      this.depth -= 1;
      count(this.now() - start);
    }
  }
}

/** The process's clock, which the codec and the service definition's serializers report to. */
export const wireClock = new WireClock();
