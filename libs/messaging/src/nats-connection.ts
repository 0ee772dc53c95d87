import { connect, type NatsConnection } from '@nats-io/transport-node';
import { natsServersOf, redactedUrl, type NatsClientConfig } from '#libs/config';
import type { LineLogger } from '#libs/logging';
import { natsAuthenticator, natsTlsOptions } from './nats-auth.js';

/** Delay between reconnect attempts starts here and doubles up to the max. */
export const NATS_RECONNECT_MIN_MS = 250;
export const NATS_RECONNECT_MAX_MS = 5000;

/**
 * Connects to NATS and keeps reconnecting forever with exponential backoff, logging each
 * disconnect and reconnect. `waitOnFirstConnect` makes start-up wait for a server that is
 * still starting instead of failing; a server that refuses the credentials fails it.
 * `client` is a URL list, or the full client settings (credentials, TLS; credentials in the URL
 * are used too). Nothing secret is logged.
 */
export async function connectNats(
  client: string | NatsClientConfig,
  name: string,
  logger?: LineLogger,
): Promise<NatsConnection> {
  const config: NatsClientConfig = typeof client === 'string' ? { natsUrl: client } : client;
  const authenticator = natsAuthenticator(config);
  const tls = natsTlsOptions(config);
  let attempt = 0;
  const nc = await connect({
    servers: natsServersOf(config.natsUrl),
    name,
    ...(authenticator ? { authenticator } : {}),
    ...(tls ? { tls } : {}),
    maxReconnectAttempts: -1,
    waitOnFirstConnect: true,
    reconnectDelayHandler: () => {
      attempt += 1;
      return Math.min(NATS_RECONNECT_MAX_MS, NATS_RECONNECT_MIN_MS * 2 ** Math.min(attempt, 8));
    },
    pingInterval: 10_000,
    // Otherwise every request captures a stack trace when it is made, for an error it seldom
    // has: a trainer makes several per task. Timeouts and failures still come as their errors.
    noAsyncTraces: true,
  });
  if (logger) {
    void (async () => {
      for await (const s of nc.status()) {
        const server = redactedUrl(String((s as { server?: unknown }).server));
        if (s.type === 'disconnect') logger.warn(`NATS disconnected from ${server}; reconnecting`);
        if (s.type === 'reconnect') {
          attempt = 0;
          logger.log(`NATS reconnected to ${server}`);
        }
      }
    })().catch(() => undefined);
  }
  return nc;
}

export type { NatsConnection };
