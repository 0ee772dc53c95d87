import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { LOG_FORMATS, type LogFormat } from '#libs/logging';
import { env, readConfig, type EnvSpec } from './env-config.js';
import { NATS_CLIENT_CONFIG, natsClientRules, type NatsClientConfig } from './nats-client-config.js';
import { REDIS_TLS_CONFIG, type RedisTlsConfig } from './tls-config.js';
/** Default Redis URL for a local cluster. */
export const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';
/** Interface the metrics and health server binds to when `METRICS_HOST` is unset. */
export const DEFAULT_METRICS_HOST = '127.0.0.1';
/**
 * Port of the metrics and health server when `METRICS_PORT` is unset: 0, any free port, so the
 * services of one machine never collide; each registers its URL in its member entry, where
 * `tributary ps` shows it. Set a fixed port per process for a static Prometheus configuration.
 */
export const DEFAULT_METRICS_PORT = 0;
/** JetStream replicas of every stream and bucket when `TRIBUTARY_JS_REPLICAS` is unset: one server. */
export const DEFAULT_JS_REPLICAS = 1;
/** Most JetStream replicas a stream may have (the server's own limit). */
export const MAX_JS_REPLICAS = 5;

/** Settings every Tributary service reads from its environment. */
export interface CommonConfig extends NatsClientConfig, RedisTlsConfig {
  /** Redis URL (`REDIS_URL`): `redis://` or `rediss://` (TLS), with `user:password@` for an ACL user. */
  redisUrl: string;
  /** This process's id (`TRIBUTARY_ID`), default `<role>-<host>-<pid>-<random>`. */
  id?: string;
  /** Log level (`LOG_LEVEL`). */
  logLevel: 'error' | 'warn' | 'log' | 'debug' | 'verbose';
  /** Log line format (`LOG_FORMAT`): `text`, or `json` for one JSON object per line. */
  logFormat: LogFormat;
  /** Interface of the metrics and health server (`METRICS_HOST`). */
  metricsHost: string;
  /** Port of the metrics and health server (`METRICS_PORT`); 0 picks a free one. */
  metricsPort: number;
  /** Host name Prometheus reaches this one by (`METRICS_ADVERTISE_HOST`); default the bound host. */
  metricsAdvertiseHost?: string;
  /**
   * Copies JetStream keeps of every Tributary stream and bucket (`TRIBUTARY_JS_REPLICAS`): 1 for
   * one server, 3 on a NATS cluster so one node may be lost.
   */
  jsReplicas: number;
}

/** Environment fields shared by all services. */
export const COMMON_CONFIG: EnvSpec<CommonConfig> = {
  ...NATS_CLIENT_CONFIG,
  redisUrl: ['REDIS_URL', env.url({ default: DEFAULT_REDIS_URL, protocols: ['redis', 'rediss'] })],
  id: ['TRIBUTARY_ID', env.optionalString()],
  logLevel: ['LOG_LEVEL', env.oneOf(['error', 'warn', 'log', 'debug', 'verbose'] as const, { default: 'log' })],
  logFormat: ['LOG_FORMAT', env.oneOf(LOG_FORMATS, { default: 'text' })],
  metricsHost: ['METRICS_HOST', env.string({ default: DEFAULT_METRICS_HOST })],
  metricsPort: ['METRICS_PORT', env.int({ default: DEFAULT_METRICS_PORT, min: 0, max: 65_535 })],
  metricsAdvertiseHost: ['METRICS_ADVERTISE_HOST', env.optionalString()],
  jsReplicas: ['TRIBUTARY_JS_REPLICAS', env.int({ default: DEFAULT_JS_REPLICAS, min: 1, max: MAX_JS_REPLICAS })],
  ...REDIS_TLS_CONFIG,
};

/** Reads the common settings plus a service's own, all validated together. */
export function readServiceConfig<T>(
  own: EnvSpec<T>,
  source: Record<string, string | undefined> = process.env,
): CommonConfig & T {
  return readConfig({ ...COMMON_CONFIG, ...own } as EnvSpec<CommonConfig & T>, source, [natsClientRules]);
}

/** A process id that is unique across hosts and restarts. */
export function makeServiceId(role: string): string {
  const host = hostname()
    .split('.')[0]
    .replace(/[^A-Za-z0-9_-]/g, '-');
  return `${role}-${host}-${process.pid}-${randomBytes(2).toString('hex')}`;
}

/** Nest log levels enabled at and above `level`. */
export function logLevelsFrom(level: CommonConfig['logLevel']): CommonConfig['logLevel'][] {
  const order: CommonConfig['logLevel'][] = ['error', 'warn', 'log', 'debug', 'verbose'];
  return order.slice(0, order.indexOf(level) + 1);
}
