/**
 * Which parameter server shard holds which parameter. Every trainer and every shard computes the
 * same map from the same list, so nothing about it has to be stored or agreed on at run time.
 *
 * The map balances elements, not parameter counts: parameters are taken largest first (ties by
 * name, compared by UTF-16 code units so no locale is involved) and each goes to the shard
 * holding the fewest elements so far (ties to the lowest shard index). The result depends only
 * on the set of (name, size) pairs, not on their order. A shard may be left empty when there are
 * fewer parameters than shards.
 */

/** A parameter's name and its number of elements. */
export interface ParamSize {
  name: string;
  size: number;
}

/** A parameter was listed twice, or a size or shard count is unusable. */
export class ShardingError extends Error {
  override readonly name = 'ShardingError';
}

/** The assignment of parameters to shards, as computed by `assignShards`. */
export class ShardMap {
  private readonly byName: ReadonlyMap<string, number>;

  /** @internal Built by `assignShards`. */
  constructor(
    /** Number of shards. */
    readonly shardCount: number,
    assignment: ReadonlyMap<string, number>,
    /** Elements held by each shard (an empty tensor counts as one). */
    readonly loads: readonly number[],
  ) {
    this.byName = assignment;
  }

  /** The shard holding `name`; throws `ShardingError` for a name not in the map. */
  shardOf(name: string): number {
    const shard = this.byName.get(name);
    if (shard === undefined) throw new ShardingError(`parameter "${name}" is not in the shard map`);
    return shard;
  }

  /** True when `name` is in the map. */
  has(name: string): boolean {
    return this.byName.has(name);
  }

  /** Names held by `shard`, in the order they were assigned (largest first). */
  namesOf(shard: number): string[] {
    return [...this.byName].filter(([, s]) => s === shard).map(([n]) => n);
  }
}

function compareNames(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Assigns each parameter to one of `shardCount` shards; see the module comment for the rule. */
export function assignShards(params: readonly ParamSize[], shardCount: number): ShardMap {
  if (!Number.isInteger(shardCount) || shardCount < 1) {
    throw new ShardingError(`shard count must be a positive integer, got ${shardCount}`);
  }
  const seen = new Set<string>();
  for (const p of params) {
    if (seen.has(p.name)) throw new ShardingError(`parameter "${p.name}" is listed twice`);
    if (!Number.isSafeInteger(p.size) || p.size < 0) {
      throw new ShardingError(`parameter "${p.name}" has an invalid size ${p.size}`);
    }
    seen.add(p.name);
  }
  const ordered = [...params].sort((a, b) => b.size - a.size || compareNames(a.name, b.name));
  const loads = new Array<number>(shardCount).fill(0);
  const assignment = new Map<string, number>();
  for (const p of ordered) {
    let best = 0;
    for (let s = 1; s < shardCount; s++) if (loads[s] < loads[best]) best = s;
    assignment.set(p.name, best);
    // An empty tensor still counts once, so many of them spread out too.
    loads[best] += Math.max(p.size, 1);
  }
  return new ShardMap(shardCount, assignment, loads);
}
