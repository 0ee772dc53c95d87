import { makeGenericClientConstructor, type ChannelCredentials, type ClientOptions } from '@grpc/grpc-js';
import {
  PushPullReply,
  ParameterServerService as GeneratedService,
  type ParameterServerClient as GeneratedClient,
} from '#proto/generated/pserver.js';
import { encodeInitChunk, encodePullChunk, encodePushChunk, encodePushPullReply } from './tensor-wire.js';

/**
 * The parameter server's gRPC service: the generated definition, with the messages that carry
 * tensor bytes encoded by `tensor-wire.ts` (one copy, data aligned for an in-place view) rather
 * than by the generated encoders. Decoding stays generated.
 */
export const ParameterServerService = {
  ...GeneratedService,
  initParams: { ...GeneratedService.initParams, requestSerialize: encodeInitChunk },
  pushGradients: { ...GeneratedService.pushGradients, requestSerialize: encodePushChunk },
  pullParams: { ...GeneratedService.pullParams, responseSerialize: encodePullChunk },
  pushPull: { ...GeneratedService.pushPull, requestSerialize: encodePushChunk, responseSerialize: encodePushPullReply },
  steps: { ...GeneratedService.steps, requestSerialize: encodePushChunk, responseSerialize: encodePushPullReply },
} as const satisfies typeof GeneratedService;

/** A client of the parameter server's gRPC service, over {@link ParameterServerService}. */
export type ParameterServerClient = GeneratedClient;

/** Constructor of {@link ParameterServerClient}. */
export const ParameterServerClient = makeGenericClientConstructor(
  ParameterServerService,
  'tributary.pserver.v1.ParameterServer',
) as unknown as {
  new (address: string, credentials: ChannelCredentials, options?: Partial<ClientOptions>): ParameterServerClient;
  service: typeof ParameterServerService;
  serviceName: string;
};

/** A `PushPullReply` with every field at its default, which replies spread and override. */
export const EMPTY_PUSH_PULL_REPLY: Readonly<PushPullReply> = Object.freeze(PushPullReply.fromPartial({}));
