import fc from 'fast-check';
import { SeededRandom } from '#libs/data-order';
import { ShuffleBuffer } from './shuffle-buffer.js';

/** Everything `items` gives through a buffer: what pushing displaces, then the drain. */
function throughBuffer(items: readonly number[], capacity: number, seed: number): number[] {
  const buffer = new ShuffleBuffer<number>(capacity, new SeededRandom(seed));
  const out: number[] = [];
  for (const item of items) {
    const displaced = buffer.push(item);
    if (displaced !== undefined) out.push(displaced);
  }
  for (let x = buffer.take(); x !== undefined; x = buffer.take()) out.push(x);
  return out;
}

const upTo = (n: number) => Array.from({ length: n }, (_, i) => i);

describe('shuffle buffer', () => {
  it('shuffle buffer - every item comes out exactly once, the same way for the same seed', () => {
    fc.assert(
      fc.property(fc.nat({ max: 60 }), fc.integer({ min: 1, max: 80 }), fc.integer(), (n, capacity, seed) => {
        const out = throughBuffer(upTo(n), capacity, seed);
        expect([...out].sort((a, b) => a - b)).toEqual(upTo(n));
        expect(throughBuffer(upTo(n), capacity, seed)).toEqual(out);
      }),
    );
  });

  it('shuffle buffer - holds at most its capacity, and nothing comes out before it is full', () => {
    const buffer = new ShuffleBuffer<number>(3, new SeededRandom(1));
    expect([buffer.push(0), buffer.push(1), buffer.push(2)]).toEqual([undefined, undefined, undefined]);
    expect(buffer.size).toBe(3);
    expect([0, 1, 2]).toContain(buffer.push(3));
    expect(buffer.size).toBe(3);
  });

  it('shuffle buffer - capacity 1 keeps the input order; a big one mixes it', () => {
    expect(throughBuffer(upTo(20), 1, 9)).toEqual(upTo(20));
    expect(throughBuffer(upTo(20), 20, 9)).not.toEqual(upTo(20));
    expect(throughBuffer(upTo(20), 20, 9)).not.toEqual(throughBuffer(upTo(20), 20, 10));
  });

  it('shuffle buffer - an item can only move forward by up to the capacity', () => {
    // With capacity c, the k-th output is taken from the first k + c inputs.
    const out = throughBuffer(upTo(200), 5, 4);
    out.forEach((item, k) => expect(item).toBeLessThan(k + 5));
  });

  it('shuffle buffer - refuses a capacity that is not a positive integer', () => {
    for (const bad of [0, -1, 2.5, NaN]) {
      expect(() => new ShuffleBuffer<number>(bad, new SeededRandom(1))).toThrow(RangeError);
    }
  });
});
