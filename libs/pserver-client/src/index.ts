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
export {
  INIT_POLL_MS,
  INIT_WAIT_MS,
  ShardedPserverClient,
  UNAVAILABLE_BACKOFF_MS,
  UNAVAILABLE_MAX_BACKOFF_MS,
  UNAVAILABLE_RETRY_MS,
} from './sharded-client.js';

export type { PserverClientOptions, PullOptions, PulledShard, PushRequest } from './pserver-client.js';
export type { KvShardDirectoryOptions, ShardDirectory } from './shard-directory.js';
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
export type {
  BeginInitReply,
  JobStatus,
  NamedTensor,
  PushReply,
  SaveReply,
  ShardMap,
  StatusReply,
  TensorArray,
  TensorInfo,
} from '#libs/pserver-protocol';
