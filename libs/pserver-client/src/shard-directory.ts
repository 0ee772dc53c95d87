import type { KV } from '@nats-io/kv';
import { watchBucket } from '#libs/messaging';
import { sleep } from '#libs/retry';

/** Prefix of the keys parameter servers register under: `shard-<k>`. */
export const SHARD_KEY_PREFIX = 'shard-';
/** How long a call waits for a shard with no registered address before failing. */
export const ADDRESS_WAIT_MS = 30_000;

/** How long `KvShardDirectory.open` waits for the bucket's current entries. */
export const INITIAL_WATCH_WAIT_MS = 500;

/** The key shard `k` registers under. */
export function shardKey(shard: number): string {
  return `${SHARD_KEY_PREFIX}${shard}`;
}

/** Where each shard of the parameter servers listens. */
export interface ShardDirectory {
  /** Number of shards. */
  readonly shardCount: number;
  /** The shard's current `host:port`, if it is registered. */
  address(shard: number): string | undefined;
  /** The shard's address, waiting up to `timeoutMs` for it to register. */
  waitForAddress(shard: number, timeoutMs?: number): Promise<string>;
  /** Calls `listener` when a shard's address changes or goes away; returns an unsubscribe. */
  onChange(listener: (shard: number, address: string | undefined) => void): () => void;
  /** Stops watching. */
  close(): void;
}

/** No address is registered for a shard within the wait. */
export class ShardAddressTimeoutError extends Error {
  override readonly name = 'ShardAddressTimeoutError';

  constructor(
    readonly shard: number,
    timeoutMs: number,
  ) {
    super(`no parameter server registered as ${shardKey(shard)} within ${timeoutMs} ms`);
  }
}

/** Keeps addresses and wakes waiters; the two directories share it. */
abstract class AddressBook implements ShardDirectory {
  protected readonly addresses = new Map<number, string>();
  private readonly listeners = new Set<(shard: number, address: string | undefined) => void>();

  constructor(readonly shardCount: number) {}

  address(shard: number): string | undefined {
    return this.addresses.get(shard);
  }

  waitForAddress(shard: number, timeoutMs = ADDRESS_WAIT_MS): Promise<string> {
    const known = this.addresses.get(shard);
    if (known) return Promise.resolve(known);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        off();
        reject(new ShardAddressTimeoutError(shard, timeoutMs));
      }, timeoutMs);
      const off = this.onChange((s, address) => {
        if (s !== shard || !address) return;
        clearTimeout(timer);
        off();
        resolve(address);
      });
    });
  }

  onChange(listener: (shard: number, address: string | undefined) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  abstract close(): void;

  protected set(shard: number, address: string | undefined): void {
    if (this.addresses.get(shard) === address) return;
    if (address) this.addresses.set(shard, address);
    else this.addresses.delete(shard);
    for (const l of [...this.listeners]) l(shard, address);
  }
}

/** A fixed list of addresses, shard k at index k (tests, or a cluster without NATS). */
export class StaticShardDirectory extends AddressBook {
  constructor(addresses: readonly string[]) {
    super(addresses.length);
    if (addresses.length === 0) throw new RangeError('a shard directory needs at least one address');
    addresses.forEach((a, k) => this.addresses.set(k, a));
  }

  close(): void {}
}

/** Options of `KvShardDirectory.open`. */
export interface KvShardDirectoryOptions {
  /** Number of shards (the job spec's `pservers.count`). Default: one more than the highest registered shard. */
  shardCount?: number;
  /** With no `shardCount`, how long to wait for the first registration. Default `ADDRESS_WAIT_MS`. */
  timeoutMs?: number;
}

/**
 * Addresses from the `tributary-pservers` KV bucket (`shard-<k>` → `{ address, ... }`), kept
 * current by a watch, so a shard restarted at a new address is picked up.
 */
export class KvShardDirectory extends AddressBook {
  private stopWatch: () => void = () => undefined;

  private constructor(shardCount: number) {
    super(shardCount);
  }

  /** Reads the registered shards and starts watching the bucket. */
  static async open(kv: KV, options: KvShardDirectoryOptions = {}): Promise<KvShardDirectory> {
    let shardCount = options.shardCount;
    if (shardCount === undefined) {
      const deadline = Date.now() + (options.timeoutMs ?? ADDRESS_WAIT_MS);
      for (;;) {
        const shards: number[] = [];
        for await (const key of await kv.keys()) {
          const k = parseShardKey(key);
          if (k !== undefined) shards.push(k);
        }
        if (shards.length > 0) {
          shardCount = Math.max(...shards) + 1;
          break;
        }
        if (Date.now() > deadline) throw new ShardAddressTimeoutError(0, options.timeoutMs ?? ADDRESS_WAIT_MS);
        await sleep(200);
      }
    }
    const directory = new KvShardDirectory(shardCount);
    // A watch the client library ends (a server restart) is opened again where it stopped.
    const watch = await watchBucket(kv, { name: 'watch of the pservers bucket' });
    directory.stopWatch = () => watch.stop();
    let ready!: () => void;
    const initial = new Promise<void>((r) => (ready = r));
    void (async () => {
      for await (const entry of watch) {
        const k = parseShardKey(entry.key);
        if (k !== undefined && k < shardCount) {
          if (entry.operation !== 'PUT') directory.set(k, undefined);
          else {
            // An entry that is not a registration (garbage) leaves the last known address in use.
            const address = addressOf(entry.value);
            if (address !== undefined) directory.set(k, address);
          }
        }
        // `delta` counts the entries still to come of what the bucket held when this one was sent.
        if (!entry.delta) ready();
      }
      ready();
    })().catch(() => ready());
    // An empty bucket delivers nothing, so the initial state is also taken as read after a pause;
    // calls wait for a missing shard's address anyway.
    let pause: NodeJS.Timeout | undefined;
    await Promise.race([initial, new Promise((r) => (pause = setTimeout(r, INITIAL_WATCH_WAIT_MS)))]);
    clearTimeout(pause);
    return directory;
  }

  close(): void {
    this.stopWatch();
  }
}

function parseShardKey(key: string): number | undefined {
  if (!key.startsWith(SHARD_KEY_PREFIX)) return undefined;
  const rest = key.slice(SHARD_KEY_PREFIX.length);
  return /^\d+$/.test(rest) ? Number(rest) : undefined;
}

function addressOf(value: Uint8Array): string | undefined {
  try {
    const parsed = JSON.parse(new TextDecoder().decode(value)) as { address?: unknown };
    return typeof parsed.address === 'string' && parsed.address !== '' ? parsed.address : undefined;
  } catch {
    return undefined;
  }
}
