/** Injection token of the service's `NatsConnection`. */
export const NATS_CONNECTION = Symbol('NATS_CONNECTION');
/** Injection token of the `NatsLink` following the service's NATS connection. */
export const NATS_LINK = Symbol('NATS_LINK');
/** Injection token of the service's `RedisConnection`. */
export const REDIS_CONNECTION = Symbol('REDIS_CONNECTION');
/** Injection token of the service's validated configuration object. */
export const SERVICE_CONFIG = Symbol('SERVICE_CONFIG');
/** Injection token of the service's KV buckets. */
export const BUCKETS = Symbol('BUCKETS');
/** Injection token of the process's `ServiceMetrics`: its Prometheus registry and readiness checks. */
export const SERVICE_METRICS = Symbol('SERVICE_METRICS');
