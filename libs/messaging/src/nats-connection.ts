import { connect, type NatsConnection } from '@nats-io/transport-node';
import type { LineLogger } from '#libs/logging';

/** Delay between reconnect attempts starts here and doubles up to the max. */
export const NATS_RECONNECT_MIN_MS = 250;
export const NATS_RECONNECT_MAX_MS = 5000;

/**
 * Connects to NATS and keeps reconnecting forever with exponential backoff, logging each
 * disconnect and reconnect. `waitOnFirstConnect` makes start-up wait for a server that is
 * still starting instead of failing.
 */
export async function connectNats(url: string, name: string, logger?: LineLogger): Promise<NatsConnection> {
  let attempt = 0;
  const nc = await connect({
    servers: url.split(',').map((s) => s.trim()),
    name,
    maxReconnectAttempts: -1,
    waitOnFirstConnect: true,
    reconnectDelayHandler: () => {
      attempt += 1;
      return Math.min(NATS_RECONNECT_MAX_MS, NATS_RECONNECT_MIN_MS * 2 ** Math.min(attempt, 8));
    },
    pingInterval: 10_000,
  });
  if (logger) {
    void (async () => {
      for await (const s of nc.status()) {
        if (s.type === 'disconnect') logger.warn(`NATS disconnected from ${String(s.server)}; reconnecting`);
        if (s.type === 'reconnect') {
          attempt = 0;
          logger.log(`NATS reconnected to ${String(s.server)}`);
        }
      }
    })().catch(() => undefined);
  }
  return nc;
}

export type { NatsConnection };
