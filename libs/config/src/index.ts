export { ConfigError, ConfigErrors } from './errors.js';
export { env, readConfig } from './env-config.js';
export {
  DEFAULT_NATS_URL,
  NATS_CLIENT_CONFIG,
  natsClientRules,
  natsServersOf,
  natsUrlCredentials,
  readNatsClientConfig,
} from './nats-client-config.js';
export { redactedUrl } from './redacted-url.js';
export { advertisedAddress } from './advertised-address.js';
export { allowedCpus, formatCpuList, parseCpuList } from './cpu-affinity.js';
export type { EnvCheck, EnvField, EnvSpec } from './env-config.js';
export type { NatsClientConfig, NatsUrlCredentials } from './nats-client-config.js';
export {
  COMMON_CONFIG,
  DEFAULT_JS_REPLICAS,
  DEFAULT_METRICS_HOST,
  DEFAULT_METRICS_PORT,
  DEFAULT_REDIS_URL,
  MAX_JS_REPLICAS,
  logLevelsFrom,
  makeServiceId,
  readServiceConfig,
} from './service-config.js';
export type { CommonConfig } from './service-config.js';
export {
  PSERVER_SERVER_TLS_CONFIG,
  PSERVER_TLS_CONFIG,
  REDIS_TLS_CONFIG,
  pserverTlsOf,
  readTlsMaterial,
  redisTlsOf,
} from './tls-config.js';
export {
  DEFAULT_DATA_ROOTS,
  DEFAULT_OUTPUT_ROOTS,
  PATH_ROOTS_CONFIG,
  PathOutsideRootsError,
  confineDataPaths,
  confineOutputPath,
  confinePath,
  staticPrefix,
} from './path-roots.js';
export type { PathRootsConfig } from './path-roots.js';
export type { PserverTlsConfig, RedisTlsConfig, TlsMaterial } from './tls-config.js';
