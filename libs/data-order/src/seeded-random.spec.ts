import fc from 'fast-check';
import { SeededRandom } from './seeded-random.js';

function outputs(seed: number, n: number): number[] {
  const random = new SeededRandom(seed);
  return Array.from({ length: n }, () => random.nextUint32());
}

describe('seeded random', () => {
  it('seeded random - gives the published mulberry32 sequence', () => {
    expect(outputs(0, 4)).toEqual([1144304738, 1416247, 958946056, 627933444]);
    expect(outputs(1, 4)).toEqual([2693262067, 11749833, 2265367787, 4213581821]);
    expect(outputs(42, 4)).toEqual([2581720956, 1925393290, 3661312704, 2876485805]);
  });

  it('seeded random - the seed counts modulo 2^32', () => {
    expect(outputs(-1, 3)).toEqual(outputs(2 ** 32 - 1, 3));
    expect(outputs(2 ** 32 + 5, 3)).toEqual(outputs(5, 3));
  });

  it('seeded random - next lies in [0, 1)', () => {
    const random = new SeededRandom(7);
    for (let i = 0; i < 1000; i++) {
      const x = random.next();
      expect(x).toBeGreaterThanOrEqual(0);
      expect(x).toBeLessThan(1);
    }
  });

  it('seeded random - below(n) stays in [0, n) and reaches every value', () => {
    fc.assert(
      fc.property(fc.integer(), fc.integer({ min: 1, max: 12 }), (seed, n) => {
        const random = new SeededRandom(seed);
        const seen = new Set<number>();
        for (let i = 0; i < 400; i++) {
          const x = random.below(n);
          expect(Number.isInteger(x) && x >= 0 && x < n).toBe(true);
          seen.add(x);
        }
        expect(seen.size).toBe(n);
      }),
      { numRuns: 50 },
    );
  });

  it('seeded random - below draws again past the last whole multiple of n', () => {
    // 2^32 - 1 leaves a remainder of 2^31 - 1 when n = 2^31 + 1; those outputs must be redrawn.
    const n = 2 ** 31 + 1;
    const random = new SeededRandom(3);
    for (let i = 0; i < 200; i++) expect(random.below(n)).toBeLessThan(n);
    expect(new SeededRandom(3).below(2 ** 32)).toBe(new SeededRandom(3).nextUint32());
  });

  it('seeded random - below refuses a bound that is not an integer in [1, 2^32]', () => {
    const random = new SeededRandom(1);
    for (const bad of [0, -3, 1.5, NaN, Infinity, 2 ** 32 + 1]) {
      expect(() => random.below(bad)).toThrow(RangeError);
    }
  });
});
