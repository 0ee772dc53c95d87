/**
 * `#libs/pserver-client`: clients of the parameter servers: one shard (`PserverClient`) or all
 * shards of a job (`ShardedPserverClient`), and where the shards are (`ShardDirectory`). What
 * travels on the wire (shard map, tensor codec, channel options) is `#libs/pserver-protocol`.
 */
export { CALL_TIMEOUT_MS, DEFAULT_PULL_WAIT_MS, PULL_DEADLINE_MARGIN_MS } from './call-deadlines.js';
export {
  InvalidGradientError,
  PserverError,
  PserverTimeoutError,
  PserverUnavailableError,
  ShardCallError,
  StaleGradientError,
  fromServiceError,
} from './errors.js';
export { INIT_POLL_MS, INIT_WAIT_MS } from './init-election.js';
export { PartitionError } from './param-partition.js';
export { PserverClient } from './pserver-client.js';
export {
  ADDRESS_WAIT_MS,
  INITIAL_WATCH_WAIT_MS,
  KvShardDirectory,
  SHARD_KEY_PREFIX,
  ShardAddressTimeoutError,
  StaticShardDirectory,
  shardKey,
} from './shard-directory.js';
export { ShardedPserverClient } from './sharded-client.js';
export { UNAVAILABLE_BACKOFF_MS, UNAVAILABLE_MAX_BACKOFF_MS, UNAVAILABLE_RETRY_MS } from './unavailable-retry.js';

export type { InitElection } from './init-election.js';
export type {
  PserverClientOptions,
  PullOptions,
  PulledShard,
  PushPullResult,
  PushRequest,
  TransferTypes,
} from './pserver-client.js';
export type { KvShardDirectoryOptions, ShardDirectory } from './shard-directory.js';
export type { ParamInfo, ParamTensor, TensorLike } from './shard-fanout.js';
export type {
  PulledParams,
  PushOutcome,
  ShardedPserverClientOptions,
  ShardedPullOptions,
  ShardedPushOptions,
  ShardedPushPullOptions,
} from './sharded-client.js';
export type {
  BeginInitReply,
  FloatWireType,
  JobStatus,
  NamedTensor,
  PserverTls,
  PushReply,
  SaveReply,
  ShardMap,
  StatusReply,
  TensorArray,
  TensorInfo,
} from '#libs/pserver-protocol';
