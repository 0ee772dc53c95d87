/**
 * `#libs/pserver-protocol`: what the parameter servers and their clients share on the wire: the
 * shard map, the tensor codec, the gRPC channel options, the metadata of refusals, and the
 * generated message and service types of `proto/pserver.proto`.
 */
export { ERROR_REASON_METADATA_KEY, MalformedTensorError, SHARD_VERSION_METADATA_KEY } from './errors.js';
export {
  CLIENT_CHANNEL_OPTIONS,
  FLOW_CONTROL_WINDOW_BYTES,
  MAX_MESSAGE_SIZE_BYTES,
  SERVER_CHANNEL_OPTIONS,
} from './grpc-options.js';
export { ShardMap, ShardingError, assignShards } from './sharding.js';
export { PserverTlsError, channelCredentials, serverCredentials, tlsChannelOptions } from './transport-security.js';
export { decodeBfloat16, decodeFloat16, encodeBfloat16, encodeFloat16 } from './half-precision.js';
export {
  FLOAT_WIRE_TYPES,
  TENSOR_CHUNK_SIZE_BYTES,
  MAX_TENSOR_SIZE_BYTES,
  TensorAssembler,
  dataTypeName,
  dataTypeOf,
  elementCount,
  elementSizeBytes,
  float32Values,
  isFloatWireType,
  sameShape,
  tensorParts,
  toNamedTensor,
  typedArrayOf,
} from './tensor-codec.js';
export { DataType } from '#proto/generated/pserver.js';
export { EMPTY_PUSH_PULL_REPLY, ParameterServerClient, ParameterServerService } from './service-definition.js';
export {
  ALIGNMENT_FIELD,
  encodeInitChunk,
  encodePullChunk,
  encodePushChunk,
  encodePushPullReply,
} from './tensor-wire.js';

export { WireClock, wireClock } from './wire-clock.js';

export type { ParamSize } from './sharding.js';
export type { PserverTls } from './transport-security.js';
export type { WireTimes } from './wire-clock.js';
export type { AssembledTensor, FloatWireType, NamedTensor, TensorArray, TensorExpectation } from './tensor-codec.js';
export type {
  BeginInitReply,
  BeginInitRequest,
  FinishInitReply,
  InitChunk,
  InitParamsReply,
  JobStatus,
  JoinReply,
  ParameterServerServer,
  PullChunk,
  PullRequest,
  PushChunk,
  PushPullReply,
  PushReply,
  SaveReply,
  StatusReply,
  Tensor,
  TensorInfo,
} from '#proto/generated/pserver.js';
