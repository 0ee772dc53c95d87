import {
  makeGenericClientConstructor,
  type ChannelCredentials,
  type Client,
  type ClientOptions,
  type ClientReadableStream,
  type ServerUnaryCall,
  type ServerWritableStream,
  type ServiceDefinition,
  type UntypedServiceImplementation,
  type sendUnaryData,
  type CallOptions,
  type ServiceError,
} from '@grpc/grpc-js';
import {
  decodeHealthCheckRequest,
  decodeHealthCheckResponse,
  encodeHealthCheckRequest,
  encodeHealthCheckResponse,
  type HealthCheckRequest,
  type HealthCheckResponse,
} from './health-messages.js';

/** The standard gRPC health service's full name. */
export const HEALTH_SERVICE_NAME = 'grpc.health.v1.Health';

const codec = {
  requestSerialize: encodeHealthCheckRequest,
  requestDeserialize: (b: Buffer) => decodeHealthCheckRequest(b),
  responseSerialize: encodeHealthCheckResponse,
  responseDeserialize: (b: Buffer) => decodeHealthCheckResponse(b),
};

/** `grpc.health.v1.Health`: `Check` (unary) and `Watch` (server streaming). */
export const HealthService = {
  check: { path: `/${HEALTH_SERVICE_NAME}/Check`, requestStream: false, responseStream: false, ...codec },
  watch: { path: `/${HEALTH_SERVICE_NAME}/Watch`, requestStream: false, responseStream: true, ...codec },
} satisfies ServiceDefinition;

/** A client of {@link HealthService}. */
export interface HealthClient extends Client {
  check(
    request: HealthCheckRequest,
    options: Partial<CallOptions>,
    callback: (err: ServiceError | null, response?: HealthCheckResponse) => void,
  ): void;
  watch(request: HealthCheckRequest, options?: Partial<CallOptions>): ClientReadableStream<HealthCheckResponse>;
}

/** Constructor of {@link HealthClient}. */
export const HealthClient = makeGenericClientConstructor(HealthService, 'Health') as unknown as {
  new (address: string, credentials: ChannelCredentials, options?: Partial<ClientOptions>): HealthClient;
};

/** Handlers of {@link HealthService}, as a `HealthStatus` answers them. */
export interface HealthHandlers extends UntypedServiceImplementation {
  check(
    call: ServerUnaryCall<HealthCheckRequest, HealthCheckResponse>,
    callback: sendUnaryData<HealthCheckResponse>,
  ): void;
  watch(call: ServerWritableStream<HealthCheckRequest, HealthCheckResponse>): void;
}
