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
export type {
  NatsClusterProcesses,
  NatsRouteOptions,
  NatsServerOptions,
  RedisServerTls,
  RedisServerUser,
  ServerProcess,
} from './server-processes.js';
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
export {
  SERVICE_INITIAL_OLD_SPACE_MB,
  SERVICE_MALLOC_TUNABLES,
  SERVICE_NODE_FLAGS,
  withServiceMalloc,
} from './service-node-flags.js';
export type { ClusterFile, ClusterOptions, ServiceProcessInfo, ServiceRole } from './cluster-supervisor.js';
export { PIN_CHOICES, TrainerPinningError, trainerCores } from './trainer-cores.js';
export type { PinChoice, PinningHost, TrainerCores } from './trainer-cores.js';
export {
  REDIS_CLUSTER_USER,
  certificateFile,
  keyFile,
  natsClientEnv,
  natsSecureConfig,
  prepareClusterSecurity,
  readEnvFile,
  redisSecureConfig,
  redisSecureTls,
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
