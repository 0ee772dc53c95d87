export {
  SERVER_START_TIMEOUT_MS,
  ServerStartError,
  freePort,
  isListening,
  isUrlReachable,
  startNatsServer,
  startRedisServer,
} from './server-processes.js';
export type { ServerProcess } from './server-processes.js';
