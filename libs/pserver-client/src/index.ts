/**
 * Clients of the parameter servers: one shard (`PserverClient`) or all shards of a job
 * (`ShardedPserverClient`), the shard map both sides share, and the tensor wire format.
 */
export {
  ERROR_REASON_METADATA_KEY,
  InvalidGradientError,
  MalformedTensorError,
  PserverError,
  PserverTimeoutError,
  PserverUnavailableError,
  SHARD_VERSION_METADATA_KEY,
  ShardCallError,
  StaleGradientError,
  fromServiceError,
} from './errors.js';
export {
  CALL_TIMEOUT_MS,
  CLIENT_CHANNEL_OPTIONS,
  DEFAULT_PULL_WAIT_MS,
  FLOW_CONTROL_WINDOW_BYTES,
  MAX_MESSAGE_SIZE_BYTES,
  PULL_DEADLINE_MARGIN_MS,
  SERVER_CHANNEL_OPTIONS,
} from './grpc-options.js';
export { PserverClient } from './pserver-client.js';
export type { PserverClientOptions, PullOptions, PulledShard, PushRequest } from './pserver-client.js';
export {
  ADDRESS_WAIT_MS,
  INITIAL_WATCH_WAIT_MS,
  KvShardDirectory,
  SHARD_KEY_PREFIX,
  ShardAddressTimeoutError,
  StaticShardDirectory,
  shardKey,
} from './shard-directory.js';
export type { KvShardDirectoryOptions, ShardDirectory } from './shard-directory.js';
export {
  INIT_POLL_MS,
  INIT_WAIT_MS,
  ShardedPserverClient,
  UNAVAILABLE_BACKOFF_MS,
  UNAVAILABLE_MAX_BACKOFF_MS,
  UNAVAILABLE_RETRY_MS,
} from './sharded-client.js';
export type {
  InitElection,
  ParamInfo,
  ParamTensor,
  PulledParams,
  PushOutcome,
  ShardedPserverClientOptions,
  ShardedPullOptions,
  ShardedPushOptions,
  TensorLike,
} from './sharded-client.js';
export { ShardMap, ShardingError, assignShards } from './sharding.js';
export type { ParamSize } from './sharding.js';
export {
  TENSOR_CHUNK_SIZE_BYTES,
  MAX_TENSOR_SIZE_BYTES,
  TensorAssembler,
  dataTypeName,
  dataTypeOf,
  elementCount,
  elementSizeBytes,
  sameShape,
  tensorParts,
  toNamedTensor,
  typedArrayOf,
} from './tensor-codec.js';
export type { AssembledTensor, NamedTensor, TensorArray, TensorExpectation } from './tensor-codec.js';
export { DataType } from '#proto/generated/pserver.js';
export type {
  BeginInitReply,
  JobStatus,
  PushReply,
  SaveReply,
  StatusReply,
  TensorInfo,
} from '#proto/generated/pserver.js';
