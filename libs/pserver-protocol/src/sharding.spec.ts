import fc from 'fast-check';
import { ShardingError, assignShards } from './index.js';

const paramList = fc.uniqueArray(
  fc.record({ name: fc.string({ minLength: 1, maxLength: 12 }), size: fc.integer({ min: 0, max: 100_000 }) }),
  { selector: (p) => p.name, maxLength: 30 },
);

describe('sharding', () => {
  it('sharding - the map depends only on the set of parameters, not their order', () => {
    fc.assert(
      fc.property(paramList, fc.integer({ min: 1, max: 8 }), fc.func(fc.integer()), (params, shards, key) => {
        const shuffled = [...params].sort((a, b) => key(a.name) - key(b.name));
        const a = assignShards(params, shards);
        const b = assignShards(shuffled, shards);
        for (const p of params) expect(b.shardOf(p.name)).toBe(a.shardOf(p.name));
        expect(b.loads).toEqual(a.loads);
      }),
    );
  });

  it('sharding - every parameter lands on exactly one shard in range', () => {
    fc.assert(
      fc.property(paramList, fc.integer({ min: 1, max: 8 }), (params, shards) => {
        const map = assignShards(params, shards);
        const all = Array.from({ length: shards }, (_, k) => map.namesOf(k)).flat();
        expect(all.sort()).toEqual(params.map((p) => p.name).sort());
        for (const p of params) expect(map.shardOf(p.name)).toBeLessThan(shards);
      }),
    );
  });

  it('sharding - greedy balance: no shard exceeds the average by more than the largest parameter', () => {
    fc.assert(
      fc.property(paramList, fc.integer({ min: 1, max: 8 }), (params, shards) => {
        const map = assignShards(params, shards);
        const total = map.loads.reduce((a, b) => a + b, 0);
        const largest = Math.max(1, ...params.map((p) => p.size));
        for (const load of map.loads) expect(load).toBeLessThanOrEqual(total / shards + largest);
      }),
    );
  });

  it('sharding - a small model spreads over every shard', () => {
    const map = assignShards(
      [
        { name: 'dense/kernel', size: 784 * 128 },
        { name: 'dense/bias', size: 128 },
        { name: 'out/kernel', size: 1280 },
        { name: 'out/bias', size: 10 },
      ],
      2,
    );
    expect(map.namesOf(0)).toEqual(['dense/kernel']);
    expect(map.namesOf(1)).toEqual(['out/kernel', 'dense/bias', 'out/bias']);
  });

  it('sharding - duplicate names and bad shard counts are refused', () => {
    expect(() =>
      assignShards(
        [
          { name: 'a', size: 1 },
          { name: 'a', size: 2 },
        ],
        2,
      ),
    ).toThrow(ShardingError);
    expect(() => assignShards([], 0)).toThrow(/positive integer/);
    expect(() => assignShards([{ name: 'a', size: -1 }], 1)).toThrow(/invalid size/);
    expect(() => assignShards([{ name: 'a', size: 1 }], 1).shardOf('b')).toThrow(/not in the shard map/);
  });
});
