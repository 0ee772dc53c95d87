import fc from 'fast-check';
import { MissingSeedError } from './errors.js';
import { MAX_PICKED_SEED, pickJobSeed } from './job-seed.js';
import { epochTaskOrder, streamSeed, taskRecordRandom } from './order-streams.js';
import { permutation } from './permutation.js';
import { SeededRandom } from './seeded-random.js';
import { shuffleSettings } from './shuffle-settings.js';

const sorted = (xs: readonly number[]) => [...xs].sort((a, b) => a - b);
const ids = (n: number) => Array.from({ length: n }, (_, i) => i);

/** The order of 10 tasks in epoch 0 of seed 1. */
const PINNED_SEED_1_EPOCH_0 = [2, 8, 7, 9, 4, 3, 6, 0, 1, 5];

describe('data order', () => {
  it('permutation - holds every index exactly once', () => {
    fc.assert(
      fc.property(fc.integer(), fc.nat({ max: 200 }), (seed, n) => {
        expect(sorted(permutation(n, new SeededRandom(seed)))).toEqual(ids(n));
      }),
    );
  });

  it('permutation - every order of three is drawn, about equally often', () => {
    const counts = new Map<string, number>();
    const random = new SeededRandom(11);
    const draws = 6000;
    for (let i = 0; i < draws; i++) {
      const key = permutation(3, random).join('');
      counts.set(key, (counts.get(key) ?? 0) + 1);
    }
    expect([...counts.keys()].sort()).toEqual(['012', '021', '102', '120', '201', '210']);
    // Each of the six has probability 1/6: 1000 expected, a standard deviation of about 29.
    for (const c of counts.values()) expect(Math.abs(c - draws / 6)).toBeLessThan(150);
  });

  it('task order - covers every task exactly once', () => {
    fc.assert(
      fc.property(fc.integer(), fc.nat({ max: 1000 }), fc.nat({ max: 300 }), (seed, epoch, tasks) => {
        expect(sorted(epochTaskOrder(tasks, seed, epoch))).toEqual(ids(tasks));
      }),
    );
  });

  it('task order - the same seed and epoch give the same order', () => {
    fc.assert(
      fc.property(fc.integer(), fc.nat({ max: 1000 }), (seed, epoch) => {
        expect(epochTaskOrder(50, seed, epoch)).toEqual(epochTaskOrder(50, seed, epoch));
      }),
    );
    // Pinned, so a change of generator or derivation (which would change every seeded job's data
    // order) cannot pass unnoticed.
    expect(epochTaskOrder(10, 1, 0)).toEqual(PINNED_SEED_1_EPOCH_0);
  });

  it('task order - differs between epochs and between seeds', () => {
    const orders = Array.from({ length: 20 }, (_, epoch) => epochTaskOrder(30, 5, epoch).join(','));
    expect(new Set(orders).size).toBe(orders.length);
    expect(orders).not.toContain(ids(30).join(','));
    expect(epochTaskOrder(30, 6, 0)).not.toEqual(epochTaskOrder(30, 5, 0));
  });

  it('stream seed - the high bits and the sign of the job seed count', () => {
    expect(streamSeed(1, [1, 0])).not.toBe(streamSeed(1 + 2 ** 32, [1, 0]));
    expect(streamSeed(-1, [1, 0])).not.toBe(streamSeed(2 ** 32 - 1, [1, 0]));
    expect(streamSeed(2 ** 40 + 3, [2, 4, 9])).toBe(streamSeed(2 ** 40 + 3, [2, 4, 9]));
  });

  it('record order - one generator per seed, epoch and task, repeatable', () => {
    const draw = (seed: number, epoch: number, taskId: number) => {
      const random = taskRecordRandom(seed, epoch, taskId);
      return Array.from({ length: 8 }, () => random.nextUint32());
    };
    expect(draw(3, 1, 4)).toEqual(draw(3, 1, 4));
    const variants = [draw(3, 1, 4), draw(3, 2, 4), draw(3, 1, 5), draw(4, 1, 4)].map((xs) => xs.join(','));
    expect(new Set(variants).size).toBe(4);
    // Task ordering and record ordering never share a stream.
    expect(streamSeed(3, [1, 1])).not.toBe(streamSeed(3, [2, 1]));
  });

  it('job seed - a picked seed is an integer in [0, MAX_PICKED_SEED]', () => {
    const seeds = Array.from({ length: 200 }, () => pickJobSeed());
    for (const seed of seeds) {
      expect(Number.isInteger(seed) && seed >= 0 && seed <= MAX_PICKED_SEED).toBe(true);
    }
    expect(new Set(seeds).size).toBeGreaterThan(190);
  });
});

describe('shuffle settings', () => {
  it('shuffle settings - off, or on with the seed and buffer size of the spec', () => {
    expect(shuffleSettings('j', { shuffle: false, seed: 3 })).toBeUndefined();
    expect(shuffleSettings('j', { seed: 3 })).toBeUndefined();
    expect(shuffleSettings('j', { shuffle: true, seed: 3 })).toEqual({ seed: 3 });
    expect(shuffleSettings('j', { shuffle: true, seed: 0, shuffleBuffer: 9 })).toEqual({ seed: 0, bufferRecords: 9 });
  });

  it('shuffle settings - shuffling without a seed is refused, naming the job', () => {
    expect(() => shuffleSettings('job-7', { shuffle: true })).toThrow(MissingSeedError);
    expect(() => shuffleSettings('job-7', { shuffle: true })).toThrow(/job job-7: training.shuffle is on/);
  });
});
