import { PserverClient, type PserverClientOptions } from './pserver-client.js';
import { ADDRESS_WAIT_MS, type ShardDirectory } from './shard-directory.js';
import { UNAVAILABLE_RETRY_MS, retryWhileAway } from './unavailable-retry.js';

/** Settings of a `ShardClients`. */
export interface ShardClientsOptions {
  /** Options of each shard's client. */
  client?: Omit<PserverClientOptions, 'shard'>;
  /** How long a call waits for an unregistered shard's address. Default `ADDRESS_WAIT_MS`. */
  addressWaitMs?: number;
  /** How long `retrying` calls retry an unreachable shard. Default `UNAVAILABLE_RETRY_MS`. */
  unavailableRetryMs?: number;
}

/**
 * One `PserverClient` per shard, at the address the directory gives. A shard whose address
 * changes gets a new client on its next call, so a shard restarted elsewhere is followed.
 */
export class ShardClients {
  private readonly clients = new Map<number, PserverClient>();
  private readonly stopWatching: () => void;

  constructor(
    private readonly directory: ShardDirectory,
    private readonly options: ShardClientsOptions = {},
  ) {
    this.stopWatching = directory.onChange((shard) => {
      this.clients.get(shard)?.close();
      this.clients.delete(shard);
    });
  }

  /** Number of shards. */
  get shardCount(): number {
    return this.directory.shardCount;
  }

  /** The client of `shard`, waiting up to `waitMs` for its address to be registered. */
  async get(shard: number, waitMs = this.options.addressWaitMs ?? ADDRESS_WAIT_MS): Promise<PserverClient> {
    const known = this.clients.get(shard);
    if (known) return known;
    const address = await this.directory.waitForAddress(shard, waitMs);
    const existing = this.clients.get(shard);
    if (existing) return existing;
    const client = new PserverClient(address, { ...this.options.client, shard });
    this.clients.set(shard, client);
    return client;
  }

  /**
   * Runs a call on `shard`, retrying it while the shard is away (see `retryWhileAway`); each
   * try asks the directory for the current address.
   */
  retrying<T>(shard: number, call: (c: PserverClient) => Promise<T>, signal?: AbortSignal): Promise<T> {
    return retryWhileAway(shard, async (addressWaitMs) => call(await this.get(shard, addressWaitMs)), {
      retryMs: this.options.unavailableRetryMs ?? UNAVAILABLE_RETRY_MS,
      addressWaitMs: this.options.addressWaitMs ?? ADDRESS_WAIT_MS,
      signal,
    });
  }

  /** Closes every channel and stops following the directory (the directory stays open). */
  close(): void {
    this.stopWatching();
    for (const c of this.clients.values()) c.close();
    this.clients.clear();
  }
}
