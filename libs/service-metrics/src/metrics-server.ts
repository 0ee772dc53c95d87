import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { advertisedAddress } from '#libs/config';
import type { ServiceMetrics } from './service-metrics.js';

/** A running metrics and health server. */
export interface MetricsServer {
  /** The port it listens on. */
  port: number;
  /** Where Prometheus scrapes it: `http://<host>:<port>/metrics`. */
  url: string;
  /** Stops listening and ends open connections. */
  close(): Promise<void>;
}

/** Where the metrics server listens. */
export interface MetricsServerOptions {
  host: string;
  /** 0 picks a free port. */
  port: number;
  /** Host name others reach this one by; default `host`, or the machine's name for a wildcard host. */
  advertiseHost?: string;
}

/**
 * Serves a process's metrics and health over HTTP:
 * - `GET /metrics`: Prometheus exposition text of `metrics.registry`;
 * - `GET /healthz`: 200 while the process runs;
 * - `GET /readyz`: 200 when every readiness check holds, else 503 with the reasons, one a line.
 * Sets `metrics.url` once listening.
 */
export async function startMetricsServer(
  metrics: ServiceMetrics,
  options: MetricsServerOptions,
): Promise<MetricsServer> {
  const server = createServer((req, res) => {
    respond(metrics, req, res).catch((err: Error) => send(res, 500, `metrics failed: ${err.message}\n`));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  const url = `http://${advertisedAddress(options.host, port, options.advertiseHost)}/metrics`;
  metrics.url = url;
  return { port, url, close: () => close(server) };
}

async function respond(metrics: ServiceMetrics, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const path = new URL(req.url ?? '/', 'http://localhost').pathname;
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.setHeader('allow', 'GET, HEAD');
    send(res, 405, `${req.method} is not allowed; use GET\n`);
    return;
  }
  switch (path) {
    case '/metrics': {
      const text = await metrics.render();
      send(res, 200, text, metrics.registry.contentType);
      return;
    }
    case '/healthz':
      send(res, 200, 'ok\n');
      return;
    case '/readyz': {
      const reasons = metrics.readiness.reasons();
      if (reasons.length === 0) send(res, 200, 'ready\n');
      else send(res, 503, `not ready\n${reasons.join('\n')}\n`);
      return;
    }
    default:
      send(res, 404, `${path} not found; try /metrics, /healthz or /readyz\n`);
  }
}

function send(res: ServerResponse, status: number, body: string, contentType = 'text/plain; charset=utf-8'): void {
  if (res.headersSent) {
    res.end();
    return;
  }
  res.writeHead(status, { 'content-type': contentType, 'cache-control': 'no-store' });
  res.end(body);
}

function close(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}
