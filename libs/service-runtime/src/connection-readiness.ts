import type { RedisConnection } from '#libs/messaging';
import type { ReadinessCheck } from '#libs/service-metrics';
import type { NatsLink } from './nats-link.js';

/** Ready while the link's connection is connected: follows its disconnects and reconnects, and its close. */
export function natsReadiness(link: NatsLink): ReadinessCheck {
  return () => {
    if (link.nc.isClosed()) return 'the NATS connection is closed';
    return link.isConnected ? undefined : 'NATS is disconnected; reconnecting';
  };
}

/** Ready while the Redis client is connected and ready for commands. */
export function redisReadiness(redis: RedisConnection): ReadinessCheck {
  return () => (redis.isReady ? undefined : 'Redis is disconnected; reconnecting');
}
