import { makeGenericClientConstructor, type ChannelCredentials, type ClientOptions } from '@grpc/grpc-js';
import {
  PushPullReply,
  ParameterServerService as GeneratedService,
  type ParameterServerClient as GeneratedClient,
} from '#proto/generated/pserver.js';
import { encodeInitChunk, encodePullChunk, encodePushChunk, encodePushPullReply } from './tensor-wire.js';
import { wireClock } from './wire-clock.js';

/** An encoder whose time counts as encoding on the process's {@link wireClock}. */
function timedEncode<M>(encode: (message: M) => Buffer): (message: M) => Buffer {
  return (message) => wireClock.encoding(() => encode(message));
}

/** A decoder whose time counts as decoding on the process's {@link wireClock}. */
function timedDecode<M>(decode: (bytes: Buffer) => M): (bytes: Buffer) => M {
  return (bytes) => wireClock.decoding(() => decode(bytes));
}

const { initParams, pushGradients, pullParams, pushPull, steps } = GeneratedService;

/**
 * The parameter server's gRPC service: the generated definition, with the messages that carry
 * tensor bytes encoded by `tensor-wire.ts` (one copy, data aligned for an in-place view) rather
 * than by the generated encoders. Decoding stays generated. The (de)serializers of those
 * messages are timed on the process's {@link wireClock}.
 */
export const ParameterServerService = {
  ...GeneratedService,
  initParams: {
    ...initParams,
    requestSerialize: timedEncode(encodeInitChunk),
    requestDeserialize: timedDecode(initParams.requestDeserialize),
  },
  pushGradients: {
    ...pushGradients,
    requestSerialize: timedEncode(encodePushChunk),
    requestDeserialize: timedDecode(pushGradients.requestDeserialize),
  },
  pullParams: {
    ...pullParams,
    responseSerialize: timedEncode(encodePullChunk),
    responseDeserialize: timedDecode(pullParams.responseDeserialize),
  },
  pushPull: {
    ...pushPull,
    requestSerialize: timedEncode(encodePushChunk),
    requestDeserialize: timedDecode(pushPull.requestDeserialize),
    responseSerialize: timedEncode(encodePushPullReply),
    responseDeserialize: timedDecode(pushPull.responseDeserialize),
  },
  steps: {
    ...steps,
    requestSerialize: timedEncode(encodePushChunk),
    requestDeserialize: timedDecode(steps.requestDeserialize),
    responseSerialize: timedEncode(encodePushPullReply),
    responseDeserialize: timedDecode(steps.responseDeserialize),
  },
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
