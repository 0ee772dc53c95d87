import { ChunkCache, describeChunkCache } from './chunk-cache.js';

/** A loader that counts its calls and gives `key`'s length in bytes. */
function counting() {
  const loads: string[] = [];
  const load = (key: string) => () => (loads.push(key), Promise.resolve(key));
  return { loads, load };
}

describe('chunk cache', () => {
  it('chunk cache - a key is loaded once and answered from memory after', async () => {
    const cache = new ChunkCache<string>(100, (v) => v.length);
    const { loads, load } = counting();
    expect(await cache.get('aa', load('aa'))).toBe('aa');
    expect(await cache.get('aa', load('aa'))).toBe('aa');
    expect(loads).toEqual(['aa']);
    expect(cache.stats()).toEqual({ hits: 1, misses: 1, evictions: 0, entries: 1, bytes: 2 });
  });

  it('chunk cache - a load on its way is shared by everyone who asks meanwhile', async () => {
    const cache = new ChunkCache<string>(100, (v) => v.length);
    let release!: (v: string) => void;
    const pending = new Promise<string>((resolve) => (release = resolve));
    let calls = 0;
    const load = () => ((calls += 1), pending);
    const first = cache.get('k', load);
    const second = cache.get('k', load);
    release('kk');
    expect(await Promise.all([first, second])).toEqual(['kk', 'kk']);
    expect(calls).toBe(1);
  });

  it('chunk cache - the least recently used go first when the budget is passed', async () => {
    const cache = new ChunkCache<string>(6, (v) => v.length);
    const { loads, load } = counting();
    for (const key of ['aa', 'bb', 'cc']) await cache.get(key, load(key));
    await cache.get('aa', load('aa')); // aa is now the most recently used
    await cache.get('ddd', load('ddd')); // 9 bytes: bb, then cc go
    expect(cache.stats()).toMatchObject({ entries: 2, bytes: 5, evictions: 2 });
    await cache.get('aa', load('aa'));
    await cache.get('bb', load('bb'));
    expect(loads).toEqual(['aa', 'bb', 'cc', 'ddd', 'bb']);
  });

  it('chunk cache - a value larger than the budget is handed out, not kept', async () => {
    const cache = new ChunkCache<string>(3, (v) => v.length);
    const { loads, load } = counting();
    expect(await cache.get('abcd', load('abcd'))).toBe('abcd');
    await cache.get('abcd', load('abcd'));
    expect(loads).toEqual(['abcd', 'abcd']);
    expect(cache.stats()).toMatchObject({ entries: 0, bytes: 0 });
  });

  it('chunk cache - a load that fails is not kept; with a budget of 0 nothing is', async () => {
    const cache = new ChunkCache<string>(100, (v) => v.length);
    await expect(cache.get('x', () => Promise.reject(new Error('disk')))).rejects.toThrow('disk');
    expect(await cache.get('x', () => Promise.resolve('x'))).toBe('x');
    expect(cache.stats()).toMatchObject({ misses: 2, entries: 1 });

    const none = new ChunkCache<string>(0, (v) => v.length);
    const { loads, load } = counting();
    await none.get('a', load('a'));
    await none.get('a', load('a'));
    expect(loads).toEqual(['a', 'a']);
    expect(() => new ChunkCache<string>(-1, (v) => v.length)).toThrow(/budget -1/);
  });

  it('chunk cache - the line a trainer logs says how many reads came from memory', () => {
    expect(describeChunkCache({ hits: 0, misses: 0, evictions: 0, entries: 0, bytes: 0 })).toBe('no chunks read');
    expect(describeChunkCache({ hits: 45, misses: 15, evictions: 0, entries: 15, bytes: 12 * 1024 * 1024 })).toBe(
      '45 of 60 chunk reads came from memory; 15 chunks held, 12.0 MiB',
    );
    expect(describeChunkCache({ hits: 1, misses: 9, evictions: 7, entries: 2, bytes: 1024 * 1024 })).toMatch(
      /1 of 10 .* 2 chunks held, 1\.0 MiB, 7 dropped for room \(TRAINER_CHUNK_CACHE_MB\)$/,
    );
  });
});
