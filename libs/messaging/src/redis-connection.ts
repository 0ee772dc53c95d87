import { createClient } from 'redis';
import { redactedUrl } from '#libs/config';
import type { LineLogger } from '#libs/logging';

/** Backoff bounds for Redis reconnects. */
export const REDIS_RECONNECT_MIN_MS = 100;
export const REDIS_RECONNECT_MAX_MS = 5000;

/** The Redis client type used throughout Tributary. */
export type RedisConnection = ReturnType<typeof createRedisClient>;

/** TLS to Redis, PEM contents: the CA that verifies the server, and a client certificate and key. */
export interface RedisTls {
  ca?: Buffer;
  cert?: Buffer;
  key?: Buffer;
}

/** Node's codes of a server certificate that does not verify: a setting to fix, not an outage. */
const CERTIFICATE_ERROR_CODES = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'CERT_HAS_EXPIRED',
  'ERR_TLS_CERT_ALTNAME_INVALID',
]);

/** True for a refusal that retrying cannot cure: wrong credentials, or a certificate that does not verify. */
export function isRedisAccessError(err: unknown): boolean {
  // Duck-typed: errors of Node's TLS layer may come from another realm than this module's `Error`.
  const { message, code } = (err ?? {}) as { message?: unknown; code?: unknown };
  if (typeof message !== 'string') return false;
  return (
    /^(WRONGPASS|NOAUTH|NOPERM)\b/.test(message) || (typeof code === 'string' && CERTIFICATE_ERROR_CODES.has(code))
  );
}

/** Backs off exponentially on outages; gives up on refused credentials and certificates. */
function reconnectStrategy(retries: number, cause: Error): number | Error {
  // A new error of this realm: the client tells giving up from a delay with `instanceof Error`.
  if (isRedisAccessError(cause)) return new Error(cause.message, { cause });
  return Math.min(REDIS_RECONNECT_MAX_MS, REDIS_RECONNECT_MIN_MS * 2 ** Math.min(retries, 8));
}

function createRedisClient(url: string, name: string, tls?: RedisTls) {
  const secure = new URL(url).protocol === 'rediss:';
  return createClient({
    url,
    name,
    socket: secure
      ? {
          tls: true,
          reconnectStrategy,
          ...(tls?.ca ? { ca: tls.ca } : {}),
          ...(tls?.cert ? { cert: tls.cert, key: tls.key } : {}),
        }
      : { reconnectStrategy },
  });
}

/**
 * Connects to Redis, reconnecting forever with exponential backoff; commands issued while
 * disconnected are queued and run on reconnect. Refused credentials or a server certificate that
 * does not verify end the attempts: `connect` rejects with that error. A `user:password@` in the URL authenticates as
 * that ACL user; `rediss://` connects over TLS, verifying the server with `tls.ca` (the system's
 * CAs without one) and presenting `tls.cert` when given.
 * @throws RangeError when TLS files are given for a `redis://` URL, which would ignore them.
 */
export async function connectRedis(
  url: string,
  name: string,
  logger?: LineLogger,
  tls?: RedisTls,
): Promise<RedisConnection> {
  if (tls !== undefined && new URL(url).protocol !== 'rediss:') {
    throw new RangeError(`Redis TLS files are set but ${redactedUrl(url)} is not a rediss:// URL`);
  }
  // CLIENT SETNAME refuses spaces; with one, the connection would never become ready.
  const client = createRedisClient(url, name.replace(/[^A-Za-z0-9_.:-]/g, '-'), tls);
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
