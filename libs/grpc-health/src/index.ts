/**
 * `#libs/grpc-health`: the standard gRPC health protocol (`grpc.health.v1.Health`, `Check` and
 * `Watch`), its messages encoded by hand, and the serving status a server answers it from.
 */
export {
  ServingStatus,
  decodeHealthCheckRequest,
  decodeHealthCheckResponse,
  encodeHealthCheckRequest,
  encodeHealthCheckResponse,
} from './health-messages.js';
export { HEALTH_SERVICE_NAME, HealthClient, HealthService } from './health-service.js';
export { HealthStatus } from './health-status.js';
export type { HealthCheckRequest, HealthCheckResponse, ServingStatusName } from './health-messages.js';
export type { HealthHandlers } from './health-service.js';
