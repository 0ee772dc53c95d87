import type { KV } from '@nats-io/kv';
import { encodeJson, type PserverRegistration } from '#libs/messaging';
import { shardKey } from '#libs/pserver-client';

/** How often a shard re-puts its registration (the entry has no TTL; this repairs a lost one). */
export const REGISTRATION_REFRESH_MS = 5_000;

/**
 * A shard's entry `shard-<k>` in the `tributary-pservers` bucket, where clients find its
 * address. Removed on `stop`, unless another process has registered the shard since.
 */
export class ShardRegistration {
  private timer?: NodeJS.Timeout;

  constructor(
    private readonly bucket: KV,
    private readonly entry: PserverRegistration,
    private readonly onError: (err: Error) => void = () => undefined,
  ) {}

  /** The key this shard registers under. */
  get key(): string {
    return shardKey(this.entry.shard);
  }

  /** Puts the entry now and keeps it there. */
  async start(): Promise<void> {
    await this.bucket.put(this.key, encodeJson(this.entry));
    this.timer = setInterval(() => void this.refresh(), REGISTRATION_REFRESH_MS);
    this.timer.unref();
  }

  /** Stops refreshing and deletes the entry if it is still this process's. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    try {
      const current = await this.bucket.get(this.key);
      if (current?.operation === 'PUT' && current.json<PserverRegistration>().id !== this.entry.id) return;
      await this.bucket.delete(this.key);
    } catch (err) {
      this.onError(err as Error);
    }
  }

  private async refresh(): Promise<void> {
    try {
      const current = await this.bucket.get(this.key);
      // A newer process for this shard took the key over: leave it alone. An entry that is not
      // a registration (garbage) is replaced.
      const other = current?.operation === 'PUT' ? readRegistration(current.value) : undefined;
      if (other !== undefined && other.id !== this.entry.id) {
        if (Date.parse(other.startedAt) > Date.parse(this.entry.startedAt)) return;
      }
      await this.bucket.put(this.key, encodeJson(this.entry));
    } catch (err) {
      this.onError(err as Error);
    }
  }
}

function readRegistration(value: Uint8Array): PserverRegistration | undefined {
  try {
    const parsed = JSON.parse(new TextDecoder().decode(value)) as Partial<PserverRegistration> | null;
    return parsed !== null &&
      typeof parsed === 'object' &&
      typeof parsed.id === 'string' &&
      typeof parsed.startedAt === 'string'
      ? (parsed as PserverRegistration)
      : undefined;
  } catch {
    return undefined;
  }
}
