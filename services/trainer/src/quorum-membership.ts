import type { ShardedPserverClient } from '#libs/pserver-client';
import { QUORUM_HEARTBEAT_MS } from './defaults.js';

/** The parameter server calls a membership makes (a `ShardedPserverClient`). */
export type QuorumClient = Pick<ShardedPserverClient, 'join' | 'leave'>;

/** Settings of a `QuorumMembership`. */
export interface QuorumMembershipOptions {
  /** How often to join again while joined. */
  heartbeatMs?: number;
  /** Told when a heartbeat failed (the next one tries again). */
  onHeartbeatError?: (err: Error) => void;
}

/**
 * This trainer's membership of a job's synchronous quorum on every shard. While joined it joins
 * again every `heartbeatMs`: a sign of life that keeps the shards from dropping it while it
 * computes or waits, and that re-admits it on a shard that restarted and forgot its members.
 * Joins, heartbeats and leaves run one at a time, so a late heartbeat never re-admits a trainer
 * that has left.
 */
export class QuorumMembership {
  private joined = false;
  private beating = false;
  private timer: NodeJS.Timeout | undefined;
  private chain: Promise<unknown> = Promise.resolve();
  private readonly heartbeatMs: number;

  constructor(
    private readonly client: QuorumClient,
    private readonly options: QuorumMembershipOptions = {},
  ) {
    this.heartbeatMs = options.heartbeatMs ?? QUORUM_HEARTBEAT_MS;
  }

  /** Whether this trainer counts itself in the quorum. */
  get isJoined(): boolean {
    return this.joined;
  }

  /**
   * Joins the quorum of every shard and starts the heartbeat; resolves with each shard's version
   * as it answered.
   */
  join(): Promise<{ versions: number[] }> {
    return this.serialize(async () => {
      const { versions } = await this.client.join();
      this.joined = true;
      this.startHeartbeat();
      return { versions };
    });
  }

  /** Joins again at once if joined (after the parameter servers came back from an outage). */
  refresh(): Promise<void> {
    return this.serialize(async () => {
      if (this.joined) await this.client.join();
    });
  }

  /** Stops the heartbeat and leaves the quorum of every shard, if joined. */
  leave(): Promise<void> {
    this.stopHeartbeat();
    return this.serialize(async () => {
      if (!this.joined) return;
      this.joined = false;
      await this.client.leave();
    });
  }

  private startHeartbeat(): void {
    if (this.timer !== undefined) return;
    this.timer = setInterval(() => {
      // A heartbeat still in flight (a shard slow to answer) is not stacked upon.
      if (this.beating) return;
      this.beating = true;
      this.refresh()
        .catch((err: Error) => this.options.onHeartbeatError?.(err))
        .finally(() => (this.beating = false));
    }, this.heartbeatMs);
    this.timer.unref();
  }

  private stopHeartbeat(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  private serialize<T>(work: () => Promise<T>): Promise<T> {
    const next = this.chain.then(work);
    this.chain = next.catch(() => undefined);
    return next;
  }
}
