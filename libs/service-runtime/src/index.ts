export { BUCKETS, NATS_CONNECTION, NATS_LINK, REDIS_CONNECTION, SERVICE_CONFIG, SERVICE_METRICS } from './tokens.js';
export { NatsLink } from './nats-link.js';
export { ConnectionsModule } from './connections.module.js';
export { SERVICE_SHUTDOWN_TIMEOUT_MS, bootstrapService, runService } from './bootstrap.js';
export type { ServiceDefinition } from './bootstrap.js';
export { MEMBER_REFRESH_MS, MemberBeacon } from './member-beacon.js';
