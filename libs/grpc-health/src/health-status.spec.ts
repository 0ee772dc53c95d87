import { Server, ServerCredentials, credentials, status as GrpcStatus, type ServiceError } from '@grpc/grpc-js';
import {
  decodeHealthCheckResponse,
  encodeHealthCheckRequest,
  encodeHealthCheckResponse,
  type HealthCheckResponse,
} from './health-messages.js';
import { HealthClient, HealthService } from './health-service.js';
import { HealthStatus } from './health-status.js';

describe('grpc health', () => {
  let server: Server;
  let client: HealthClient;
  const health = new HealthStatus();

  beforeAll(async () => {
    server = new Server();
    server.addService(HealthService, health.handlers());
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
    );
    client = new HealthClient(`127.0.0.1:${port}`, credentials.createInsecure());
  });

  afterAll(() => {
    client.close();
    health.endWatches();
    server.forceShutdown();
  });

  const check = (service: string) =>
    new Promise<HealthCheckResponse>((resolve, reject) =>
      client.check({ service }, {}, (err, res) => (err ? reject(err) : resolve(res!))),
    );

  test('grpc health - messages match the standard encoding (field 1)', () => {
    expect(encodeHealthCheckRequest({ service: 'ab' }).toString('hex')).toBe('0a026162');
    expect(encodeHealthCheckRequest({ service: '' }).length).toBe(0);
    expect(encodeHealthCheckResponse({ status: 'NOT_SERVING' }).toString('hex')).toBe('0802');
    expect(decodeHealthCheckResponse(Buffer.from('0801', 'hex'))).toEqual({ status: 'SERVING' });
    expect(decodeHealthCheckResponse(Buffer.from('0863', 'hex'))).toEqual({ status: 'UNKNOWN' });
  });

  test('grpc health - Check answers the status of a known service and NOT_FOUND for another', async () => {
    health.set('', 'SERVING');
    expect(await check('')).toEqual({ status: 'SERVING' });
    health.set('', 'NOT_SERVING');
    expect(await check('')).toEqual({ status: 'NOT_SERVING' });
    await expect(check('nope')).rejects.toMatchObject({ code: GrpcStatus.NOT_FOUND } as Partial<ServiceError>);
  });

  test('grpc health - Watch streams the status now and at each change', async () => {
    health.set('svc', 'NOT_SERVING');
    const call = client.watch({ service: 'svc' });
    const seen: string[] = [];
    const ended = new Promise<number>((resolve) => call.on('error', (err: ServiceError) => resolve(err.code)));
    await new Promise<void>((resolve) => {
      call.on('data', (m: HealthCheckResponse) => {
        seen.push(m.status);
        if (seen.length === 1) health.set('svc', 'SERVING');
        if (seen.length === 2) resolve();
      });
    });
    call.cancel();
    expect(await ended).toBe(GrpcStatus.CANCELLED);
    expect(seen).toEqual(['NOT_SERVING', 'SERVING']);
  });
});
