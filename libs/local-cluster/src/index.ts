export {
  NATS_MAX_PAYLOAD_BYTES,
  SERVER_START_TIMEOUT_MS,
  ServerStartError,
  freePort,
  isListening,
  isUrlReachable,
  startNatsServer,
  startRedisServer,
} from './server-processes.js';
export type { RedisServerTls, RedisServerUser, ServerProcess } from './server-processes.js';
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
