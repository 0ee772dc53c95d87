import type { NatsConnection } from '#libs/messaging';

/**
 * Follows a NATS connection's disconnects and reconnects: one watcher per connection, which the
 * readiness check and anyone who must know whether the process can be heard share.
 */
export class NatsLink {
  private connected = true;
  private reconnects = 0;

  constructor(readonly nc: NatsConnection) {
    void (async () => {
      for await (const s of nc.status()) {
        if (s.type === 'disconnect') this.connected = false;
        if (s.type === 'reconnect') {
          this.connected = true;
          this.reconnects += 1;
        }
      }
    })().catch(() => undefined);
  }

  /** False from a disconnect until the reconnection. */
  get isConnected(): boolean {
    return this.connected;
  }

  /** Reconnections so far. */
  get reconnections(): number {
    return this.reconnects;
  }
}
