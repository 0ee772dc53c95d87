const TWO_POW_32 = 2 ** 32;

/**
 * A small seeded pseudo-random generator: mulberry32 (32 bits of state, one 32-bit output per
 * step). The same seed always gives the same sequence, on every platform, which is all data
 * order needs; it is not meant for cryptography or for statistics beyond shuffling.
 */
export class SeededRandom {
  private state: number;

  /** `seed` is taken modulo 2^32. */
  constructor(seed: number) {
    this.state = seed >>> 0;
  }

  /** The next output, an integer in [0, 2^32). */
  nextUint32(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  }

  /** The next output as a number in [0, 1). */
  next(): number {
    return this.nextUint32() / TWO_POW_32;
  }

  /**
   * A uniform integer in [0, n), without modulo bias: outputs past the largest multiple of `n`
   * below 2^32 are drawn again.
   * @throws RangeError when `n` is not an integer in [1, 2^32].
   */
  below(n: number): number {
    if (!Number.isInteger(n) || n < 1 || n > TWO_POW_32) {
      throw new RangeError(`bound ${n} must be an integer in [1, 2^32]`);
    }
    const limit = TWO_POW_32 - (TWO_POW_32 % n);
    for (;;) {
      const x = this.nextUint32();
      if (x < limit) return x % n;
    }
  }
}
