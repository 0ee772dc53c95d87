import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { readFile } from 'node:fs/promises';
import { extname, join } from 'node:path';
import { JOB_ID_PATTERN } from '#libs/messaging';
import type { DashboardState } from './dashboard-state.js';

/** Changes are sent to the page at most this often (the snapshot is sent whole). */
export const SSE_THROTTLE_MS = 250;
/** A comment line is sent this often, so proxies and the browser keep an idle stream open. */
export const SSE_KEEPALIVE_MS = 15_000;
/** How long the page's EventSource waits before it connects again after losing the stream. */
export const SSE_RETRY_MS = 2_000;

const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
};

/** What {@link DashboardServer} serves and where it listens. */
export interface DashboardServerOptions {
  state: DashboardState;
  /** Sends the stop request of a job (as `tributary stop` does). */
  stopJob(jobId: string): Promise<void>;
  /** URL path (e.g. `/dashboard.js`) → file to serve. */
  files: Record<string, string>;
  host: string;
  /** 0 picks a free port. */
  port: number;
}

/** The files of the page and of the chart library, by URL path, under a checkout at `root`. */
export function dashboardFiles(root: string): Record<string, string> {
  const page = join(root, 'cli', 'dashboard', 'page');
  const uplot = join(root, 'node_modules', 'uplot', 'dist');
  return {
    '/': join(page, 'index.html'),
    '/dashboard.js': join(page, 'dashboard.js'),
    '/dashboard.css': join(page, 'dashboard.css'),
    '/vendor/uPlot.iife.min.js': join(uplot, 'uPlot.iife.min.js'),
    '/vendor/uPlot.min.css': join(uplot, 'uPlot.min.css'),
  };
}

/**
 * The dashboard's HTTP server: the page and its scripts, `GET /api/snapshot` (JSON), `GET
 * /api/stream` (server-sent events: a `snapshot` event at once and after every change), and
 * `POST /api/jobs/<id>/stop`.
 */
export class DashboardServer {
  private readonly server: Server;
  private readonly streams = new Set<ServerResponse>();
  private pending?: NodeJS.Timeout;
  private keepAlive?: NodeJS.Timeout;
  private unsubscribe?: () => void;

  constructor(private readonly options: DashboardServerOptions) {
    this.server = createServer((req, res) => {
      this.handle(req, res).catch((err: Error) => {
        if (!res.headersSent) this.json(res, 500, { error: err.message });
        else res.end();
      });
    });
  }

  /** Listens; resolves with the page's URL. */
  async listen(): Promise<string> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(this.options.port, this.options.host, () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    this.unsubscribe = this.options.state.onChange(() => this.scheduleBroadcast());
    this.keepAlive = setInterval(() => {
      for (const res of this.streams) res.write(': keep-alive\n\n');
    }, SSE_KEEPALIVE_MS);
    return this.url();
  }

  /** The page's URL (the host as bound; an IPv6 address bracketed). */
  url(): string {
    const addr = this.server.address();
    if (addr === null || typeof addr === 'string') throw new Error('the dashboard server is not listening');
    const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
    return `http://${host}:${addr.port}/`;
  }

  /** Ends every stream and stops listening. */
  async close(): Promise<void> {
    this.unsubscribe?.();
    clearTimeout(this.pending);
    clearInterval(this.keepAlive);
    for (const res of this.streams) res.end();
    this.streams.clear();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = new URL(req.url ?? '/', 'http://localhost').pathname;
    const stop = /^\/api\/jobs\/([^/]+)\/stop$/.exec(path);
    if (stop !== null) return this.stop(req, res, decodeURIComponent(stop[1]));
    if (req.method !== 'GET' && req.method !== 'HEAD')
      return this.json(res, 405, { error: `${req.method} not allowed` });
    if (path === '/api/snapshot') return this.json(res, 200, this.options.state.snapshot());
    if (path === '/api/stream') return this.openStream(req, res);
    const file = this.options.files[path];
    if (file === undefined) return this.json(res, 404, { error: `no such page: ${path}` });
    const body = await readFile(file);
    res.writeHead(200, {
      'content-type': CONTENT_TYPES[extname(file)] ?? 'application/octet-stream',
      'cache-control': 'no-cache',
    });
    res.end(req.method === 'HEAD' ? undefined : body);
  }

  private async stop(req: IncomingMessage, res: ServerResponse, jobId: string): Promise<void> {
    if (req.method !== 'POST') return this.json(res, 405, { error: 'stop: use POST' });
    // Another site's page may post to this address from the user's browser: only our own page may
    // stop jobs (a cross-site JSON post needs a preflight, which is never granted).
    const origin = req.headers.origin;
    if (origin !== undefined && origin !== 'null' && new URL(origin).host !== req.headers.host) {
      return this.json(res, 403, { error: `stop: requests from ${origin} are not accepted` });
    }
    if (!String(req.headers['content-type']).startsWith('application/json')) {
      return this.json(res, 415, { error: 'stop: the request must be JSON (content-type application/json)' });
    }
    if (!JOB_ID_PATTERN.test(jobId)) {
      return this.json(res, 400, { error: `stop: job id ${JSON.stringify(jobId)} does not match ${JOB_ID_PATTERN}` });
    }
    try {
      await this.options.stopJob(jobId);
    } catch (err) {
      return this.json(res, 502, { error: `stop of job ${jobId} was not sent: ${(err as Error).message}` });
    }
    this.json(res, 202, { ok: true, jobId });
  }

  private openStream(req: IncomingMessage, res: ServerResponse): void {
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
    });
    res.write(`retry: ${SSE_RETRY_MS}\n\n`);
    res.write(this.snapshotEvent());
    this.streams.add(res);
    req.on('close', () => this.streams.delete(res));
  }

  private scheduleBroadcast(): void {
    if (this.pending !== undefined) return;
    this.pending = setTimeout(() => {
      this.pending = undefined;
      if (this.streams.size === 0) return;
      const event = this.snapshotEvent();
      for (const res of this.streams) res.write(event);
    }, SSE_THROTTLE_MS);
  }

  private snapshotEvent(): string {
    return `event: snapshot\ndata: ${JSON.stringify(this.options.state.snapshot())}\n\n`;
  }

  private json(res: ServerResponse, status: number, body: unknown): void {
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-cache' });
    res.end(JSON.stringify(body));
  }
}
