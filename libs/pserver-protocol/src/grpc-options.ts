import type { ChannelOptions } from '@grpc/grpc-js';

/** Largest gRPC message either end accepts (tensors travel in parts far below this). */
export const MAX_MESSAGE_SIZE_BYTES = 64 * 1024 * 1024;
/** HTTP/2 connection window a client opens with, so large pushes and pulls do not stall on loopback. */
export const FLOW_CONTROL_WINDOW_BYTES = 32 * 1024 * 1024;

/** Channel options of every parameter server client. */
export const CLIENT_CHANNEL_OPTIONS: ChannelOptions = {
  'grpc.max_receive_message_length': MAX_MESSAGE_SIZE_BYTES,
  'grpc.max_send_message_length': MAX_MESSAGE_SIZE_BYTES,
  'grpc-node.flow_control_window': FLOW_CONTROL_WINDOW_BYTES,
  'grpc.initial_reconnect_backoff_ms': 200,
  'grpc.max_reconnect_backoff_ms': 2_000,
  // Each client opens connections of its own. grpc-js otherwise shares one HTTP/2 connection
  // among every client of the process with the same target and options, and with several
  // multi-megabyte pushes and a pull in flight on one connection, the pushes stalled until their
  // deadline; clients of different jobs would also queue behind each other's tensors.
  'grpc.use_local_subchannel_pool': 1,
};

/**
 * Options of the parameter server's gRPC server. grpc-js applies `grpc-node.flow_control_window`
 * to client connections only; the pserver widens its sessions' receive windows to
 * {@link FLOW_CONTROL_WINDOW_BYTES} itself (`PserverGrpcServer`). With the default 64 KiB windows
 * a 4 MiB push-pull on loopback moved 384–461 MB/s against 538–574 MB/s with them.
 */
export const SERVER_CHANNEL_OPTIONS: ChannelOptions = {
  'grpc.max_receive_message_length': MAX_MESSAGE_SIZE_BYTES,
  'grpc.max_send_message_length': MAX_MESSAGE_SIZE_BYTES,
};
