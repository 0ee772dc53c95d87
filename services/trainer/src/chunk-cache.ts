/** What a {@link ChunkCache} has done since it was made. */
export interface ChunkCacheStats {
  /** Reads answered from the cache (or joined to a read already on its way). */
  hits: number;
  /** Reads that went to the loader. */
  misses: number;
  /** Entries dropped to stay within the budget. */
  evictions: number;
  /** Entries held now. */
  entries: number;
  /** Bytes the settled entries hold now. */
  bytes: number;
}

interface Entry<T> {
  readonly value: Promise<T>;
  /** Counted once the value settled; 0 before. */
  bytes: number;
}

/**
 * Values loaded by key, kept within a budget of bytes, the least recently used dropped first:
 * the chunks a trainer read and checked in one epoch, read from memory in the next ones instead
 * of from the disk, through their checksums and snappy again (as a `tf.data` pipeline's
 * `cache()`). A read on its way is shared by everyone who asks for its key meanwhile; a read that
 * fails is not kept, so asking again reads again. A value is sized when it settles; one larger
 * than the whole budget is handed out but not kept. A budget of 0 keeps nothing.
 */
export class ChunkCache<T> {
  private readonly entries = new Map<string, Entry<T>>();
  private heldBytes = 0;
  private hits = 0;
  private misses = 0;
  private evictions = 0;

  constructor(
    private readonly budgetBytes: number,
    private readonly sizeOf: (value: T) => number,
  ) {
    if (!Number.isFinite(budgetBytes) || budgetBytes < 0) {
      throw new RangeError(`chunk cache budget ${budgetBytes} must be a non-negative number of bytes`);
    }
  }

  /** The value of `key`: the one kept, or `load()`'s, kept if it fits. */
  get(key: string, load: () => Promise<T>): Promise<T> {
    const kept = this.entries.get(key);
    if (kept !== undefined) {
      this.hits += 1;
      // Most recently used last: a Map iterates in insertion order.
      this.entries.delete(key);
      this.entries.set(key, kept);
      return kept.value;
    }
    this.misses += 1;
    const value = load();
    if (this.budgetBytes === 0) return value;
    const entry: Entry<T> = { value, bytes: 0 };
    this.entries.set(key, entry);
    value.then(
      (loaded) => {
        if (this.entries.get(key) !== entry) return;
        entry.bytes = this.sizeOf(loaded);
        this.heldBytes += entry.bytes;
        this.trim();
      },
      () => {
        if (this.entries.get(key) === entry) this.entries.delete(key);
      },
    );
    return value;
  }

  /** Counters and what is held now. */
  stats(): ChunkCacheStats {
    return {
      hits: this.hits,
      misses: this.misses,
      evictions: this.evictions,
      entries: this.entries.size,
      bytes: this.heldBytes,
    };
  }

  /** Drops the least recently used settled entries until the held bytes fit the budget. */
  private trim(): void {
    for (const [key, entry] of this.entries) {
      if (this.heldBytes <= this.budgetBytes) return;
      if (entry.bytes === 0) continue;
      this.entries.delete(key);
      this.heldBytes -= entry.bytes;
      this.evictions += 1;
    }
  }
}

/** The chunk cache's part in a job, for the line logged when the trainer leaves it. */
export function describeChunkCache(stats: ChunkCacheStats): string {
  const reads = stats.hits + stats.misses;
  if (reads === 0) return 'no chunks read';
  const held = (stats.bytes / (1024 * 1024)).toFixed(1);
  const dropped = stats.evictions > 0 ? `, ${stats.evictions} dropped for room (TRAINER_CHUNK_CACHE_MB)` : '';
  return `${stats.hits} of ${reads} chunk reads came from memory; ${stats.entries} chunks held, ${held} MiB${dropped}`;
}
