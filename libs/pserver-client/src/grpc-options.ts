import type { ChannelOptions } from '@grpc/grpc-js';

/** Largest gRPC message either end accepts (tensors travel in parts far below this). */
export const MAX_MESSAGE_SIZE_BYTES = 64 * 1024 * 1024;
/** HTTP/2 connection window a client opens with, so large pushes and pulls do not stall on loopback. */
export const FLOW_CONTROL_WINDOW_BYTES = 32 * 1024 * 1024;
/** Deadline of a unary call to a shard. */
export const CALL_TIMEOUT_MS = 30_000;
/** Extra time a pull's deadline allows beyond its server-side wait. */
export const PULL_DEADLINE_MARGIN_MS = 30_000;
/** How long a pull waits on the shard by default for a version (or for initialisation). */
export const DEFAULT_PULL_WAIT_MS = 60_000;

/** Channel options of every parameter server client. */
export const CLIENT_CHANNEL_OPTIONS: ChannelOptions = {
  'grpc.max_receive_message_length': MAX_MESSAGE_SIZE_BYTES,
  'grpc.max_send_message_length': MAX_MESSAGE_SIZE_BYTES,
  'grpc-node.flow_control_window': FLOW_CONTROL_WINDOW_BYTES,
  'grpc.initial_reconnect_backoff_ms': 200,
  'grpc.max_reconnect_backoff_ms': 2_000,
};

/** Options of the parameter server's gRPC server. */
export const SERVER_CHANNEL_OPTIONS: ChannelOptions = {
  'grpc.max_receive_message_length': MAX_MESSAGE_SIZE_BYTES,
  'grpc.max_send_message_length': MAX_MESSAGE_SIZE_BYTES,
  'grpc-node.flow_control_window': FLOW_CONTROL_WINDOW_BYTES,
};
