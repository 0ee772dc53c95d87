import { status as GrpcStatus, type ServerWritableStream } from '@grpc/grpc-js';
import type { HealthCheckRequest, HealthCheckResponse, ServingStatusName } from './health-messages.js';
import type { HealthHandlers } from './health-service.js';

/**
 * The serving status of a gRPC server's services, answering `grpc.health.v1.Health`: `Check`
 * returns a service's status (NOT_FOUND for a service it does not know), and `Watch` streams it
 * now and at every change (SERVICE_UNKNOWN while it is not known). The empty name stands for
 * the whole server.
 */
export class HealthStatus {
  private readonly statuses = new Map<string, ServingStatusName>();
  private readonly watchers = new Map<string, Set<ServerWritableStream<HealthCheckRequest, HealthCheckResponse>>>();

  /** Sets the status of `service` and tells its watchers when it changed. */
  set(service: string, status: ServingStatusName): void {
    if (this.statuses.get(service) === status) return;
    this.statuses.set(service, status);
    for (const call of this.watchers.get(service) ?? []) call.write({ status });
  }

  /** The status of `service`, undefined when it is not known. */
  get(service: string): ServingStatusName | undefined {
    return this.statuses.get(service);
  }

  /** Ends every watch (the server is going away). */
  endWatches(): void {
    for (const calls of this.watchers.values()) for (const call of calls) call.end();
    this.watchers.clear();
  }

  /** The handlers to add with `server.addService(HealthService, ...)`. */
  handlers(): HealthHandlers {
    return {
      check: (call, callback) => {
        const status = this.statuses.get(call.request.service);
        if (status === undefined) {
          callback({ code: GrpcStatus.NOT_FOUND, details: `unknown service "${call.request.service}"` });
        } else callback(null, { status });
      },
      watch: (call) => {
        const { service } = call.request;
        let calls = this.watchers.get(service);
        if (!calls) this.watchers.set(service, (calls = new Set()));
        calls.add(call);
        call.write({ status: this.statuses.get(service) ?? 'SERVICE_UNKNOWN' });
        call.on('cancelled', () => calls.delete(call));
      },
    };
  }
}
