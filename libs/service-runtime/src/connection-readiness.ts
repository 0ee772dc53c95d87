import type { NatsConnection, RedisConnection } from '#libs/messaging';
import type { ReadinessCheck } from '#libs/service-metrics';

/** Ready while `nc` is connected: follows its disconnects and reconnects, and its close. */
export function natsReadiness(nc: NatsConnection): ReadinessCheck {
  let connected = true;
  void (async () => {
    for await (const s of nc.status()) {
      if (s.type === 'disconnect') connected = false;
      if (s.type === 'reconnect') connected = true;
    }
  })().catch(() => undefined);
  return () => {
    if (nc.isClosed()) return 'the NATS connection is closed';
    return connected ? undefined : 'NATS is disconnected; reconnecting';
  };
}

/** Ready while the Redis client is connected and ready for commands. */
export function redisReadiness(redis: RedisConnection): ReadinessCheck {
  return () => (redis.isReady ? undefined : 'Redis is disconnected; reconnecting');
}
