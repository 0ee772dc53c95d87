export {
  NATS_CLUSTER_NAME,
  NATS_MAX_PAYLOAD_BYTES,
  SERVER_START_TIMEOUT_MS,
  ServerStartError,
  freePort,
  isListening,
  isUrlReachable,
  natsServerConfig,
  startNatsCluster,
  startNatsServer,
  startRedisServer,
} from './server-processes.js';
export type { NatsClusterProcesses, NatsRouteOptions, NatsServerOptions, ServerProcess } from './server-processes.js';
export {
  LocalCluster,
  RESTART_BACKOFF_MS,
  SERVICE_READY_TIMEOUT_MS,
  UnknownServiceError,
  clusterFilePath,
  defaultStateDir,
  isAlive,
  readClusterFile,
} from './cluster-supervisor.js';
export { SERVICE_INITIAL_OLD_SPACE_MB, SERVICE_NODE_FLAGS } from './service-node-flags.js';
export type { ClusterFile, ClusterOptions, ServiceProcessInfo, ServiceRole } from './cluster-supervisor.js';
export {
  REDIS_CLUSTER_USER,
  SECURE_CLUSTER_REDIS_TLS,
  certificateFile,
  keyFile,
  natsClientEnv,
  natsSecureConfig,
  prepareClusterSecurity,
  readEnvFile,
  redisSecureConfig,
  writeEnvFile,
} from './cluster-security.js';
export type { ClusterSecurity } from './cluster-security.js';
export {
  NATS_DEPLOYMENT_CONFIG_PATH,
  natsDeploymentConfig,
  natsPasswordVariable,
  natsServerSecurityConfig,
} from './nats-server-config.js';
export type { NatsServerSecurity } from './nats-server-config.js';
