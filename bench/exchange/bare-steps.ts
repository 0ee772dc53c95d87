/** What both ends of `exchange`'s bare gRPC link share (see `bare-server.ts`). */
import { TENSOR_CHUNK_SIZE_BYTES } from '#libs/pserver-protocol';

/** The service `grpc` serves: one bidirectional stream of raw bytes. */
export const BARE_STEPS_SERVICE = {
  steps: {
    path: '/tributary.bench.Bare/Steps',
    requestStream: true,
    responseStream: true,
    requestSerialize: (b: Buffer) => b,
    requestDeserialize: (b: Buffer) => b,
    responseSerialize: (b: Buffer) => b,
    responseDeserialize: (b: Buffer) => b,
  },
} as const;

/**
 * A round's bytes as messages of at most 1 MiB, the size the pserver client cuts tensors into;
 * each end makes its own once, so that the transport is all that is measured.
 */
export function roundMessages(roundBytes: number): Buffer[] {
  const messages: Buffer[] = [];
  for (let at = 0; at < roundBytes; at += TENSOR_CHUNK_SIZE_BYTES) {
    messages.push(Buffer.alloc(Math.min(TENSOR_CHUNK_SIZE_BYTES, roundBytes - at), 7));
  }
  return messages;
}
