export { CONSUMERS, JOB_ID_PATTERN, KV_BUCKETS, STREAMS, SUBJECTS } from './subjects.js';
export { MalformedMessageError, decodeJsonObject, encodeJson, numberField, stringField } from './json-codec.js';
export { NATS_RECONNECT_MAX_MS, NATS_RECONNECT_MIN_MS, connectNats } from './nats-connection.js';
export type { NatsConnection } from './nats-connection.js';
export { REDIS_RECONNECT_MAX_MS, REDIS_RECONNECT_MIN_MS, connectRedis } from './redis-connection.js';
export type { RedisConnection, RedisTls } from './redis-connection.js';
export {
  JetStreamNotClusteredError,
  MEMBERS_BUCKET_TTL_MS,
  StreamReplicasError,
  ensureStreams,
  ensureTrainerConsumer,
  openBucket,
  openBuckets,
} from './streams.js';
export {
  JETSTREAM_READY_POLL_MS,
  JETSTREAM_READY_TIMEOUT_MS,
  JetStreamUnavailableError,
  waitForJetStream,
} from './jetstream-readiness.js';
export type { Buckets } from './streams.js';
export {
  EVENT_ACK_TIMEOUT_MS,
  EVENT_QUEUE_LIMIT,
  EVENT_RETRY_MAX_MS,
  EVENT_RETRY_MIN_MS,
  EVENT_SHUTDOWN_FLUSH_MS,
  JobEventPublisher,
} from './event-publisher.js';
export type { JobEventPublisherOptions } from './event-publisher.js';
export { WATCH_REOPEN_MAX_MS, WATCH_REOPEN_MIN_MS, watchBucket } from './bucket-watch.js';
export { listBucketKeys } from './bucket-keys.js';
export { NATS_ROLES, ROLE_PERMISSIONS } from './role-permissions.js';
export type { NatsRole, RolePermissions } from './role-permissions.js';
export { natsAuthenticator, natsTlsOptions } from './nats-auth.js';
export type { BucketWatch, BucketWatchOptions } from './bucket-watch.js';
export { KV_WRITE_RETRY_MAX_MS, KV_WRITE_RETRY_MIN_MS, LatestValueWriter } from './latest-value-writer.js';
export type {
  EpochAccounting,
  EvaluationMetrics,
  JobEvent,
  JobEventInput,
  JobListEntry,
  JobListReply,
  JobFaultReport,
  JobRecord,
  JobState,
  JobStatusReply,
  JobSummary,
  MemberStatus,
  PserverRegistration,
  RoundNotice,
  SnapshotNotice,
  StopReason,
  StopRequest,
  TaskClaim,
  TaskClaimReply,
  TaskCounts,
  TaskMessage,
  TaskReport,
  TaskReportReply,
} from './events.js';
