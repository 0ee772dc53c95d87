import { Inject, Injectable } from '@nestjs/common';
import type { NatsConnection } from '#libs/messaging';
import { NATS_CONNECTION } from '#libs/service-runtime';

/**
 * Whether the master can hear its trainers: follows its NATS connection's disconnects and
 * reconnects. While it cannot, their claim renewals cannot reach it either, so the dispatch loop
 * lets no claim lapse; after a reconnection every claim gets a fresh lease, as after a failover.
 */
@Injectable()
export class NatsContact {
  private connected = true;
  private reconnects = 0;

  constructor(@Inject(NATS_CONNECTION) nc: NatsConnection) {
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
