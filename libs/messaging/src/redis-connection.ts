import { createClient } from 'redis';
import type { LineLogger } from '#libs/logging';

/** Backoff bounds for Redis reconnects. */
export const REDIS_RECONNECT_MIN_MS = 100;
export const REDIS_RECONNECT_MAX_MS = 5000;

/** The Redis client type used throughout Tributary. */
export type RedisConnection = ReturnType<typeof createRedisClient>;

function createRedisClient(url: string, name: string) {
  return createClient({
    url,
    name,
    socket: {
      reconnectStrategy: (retries: number) =>
        Math.min(REDIS_RECONNECT_MAX_MS, REDIS_RECONNECT_MIN_MS * 2 ** Math.min(retries, 8)),
    },
  });
}

/**
 * Connects to Redis, reconnecting forever with exponential backoff; commands issued while
 * disconnected are queued and run on reconnect.
 */
export async function connectRedis(url: string, name: string, logger?: LineLogger): Promise<RedisConnection> {
  // CLIENT SETNAME refuses spaces; with one, the connection would never become ready.
  const client = createRedisClient(url, name.replace(/[^A-Za-z0-9_.:-]/g, '-'));
  let down = false;
  client.on('error', (err: Error) => {
    if (!down) logger?.warn(`Redis connection error: ${err.message}; reconnecting`);
    down = true;
  });
  client.on('ready', () => {
    if (down) logger?.log('Redis reconnected');
    down = false;
  });
  await client.connect();
  return client;
}
