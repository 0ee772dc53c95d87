import type { KV } from '@nats-io/kv';
import { encodeJson, type MemberStatus } from '#libs/messaging';

/** How often a process refreshes its member entry (well under the bucket's TTL). */
export const MEMBER_REFRESH_MS = 3_000;

/**
 * Keeps a process's status fresh in the members bucket so `tributary ps` and the master see it;
 * the entry lapses by itself when the process dies.
 */
export class MemberBeacon {
  private timer?: NodeJS.Timeout;
  private status: MemberStatus;

  constructor(
    private readonly members: KV,
    base: Omit<MemberStatus, 'at' | 'state'> & { state?: string },
  ) {
    this.status = { state: 'idle', ...base, at: new Date().toISOString() };
  }

  /** The key of this process in the members bucket. */
  get key(): string {
    return `${this.status.role}.${this.status.id}`;
  }

  /** Merges `patch` into the status and publishes it now. */
  update(patch: Partial<MemberStatus>): void {
    this.status = { ...this.status, ...patch };
    this.publish();
  }

  /** Starts periodic refreshes. */
  start(): void {
    this.publish();
    this.timer = setInterval(() => this.publish(), MEMBER_REFRESH_MS);
    this.timer.unref();
  }

  /** Stops refreshing and removes the entry. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.members.delete(this.key).catch(() => undefined);
  }

  private publish(): void {
    this.status.at = new Date().toISOString();
    this.members.put(this.key, encodeJson(this.status)).catch(() => undefined);
  }
}
