import type { NatsClientConfig } from '#libs/config';
import type { LineLogger } from '#libs/logging';
import { MasterClient } from '#libs/master-client';
import { connectNats } from '#libs/messaging';
import { DashboardServer, dashboardFiles } from './dashboard-server.js';
import { DashboardState } from './dashboard-state.js';
import { startNatsFeed } from './nats-feed.js';

/** The dashboard's port when none is given; a busy one falls back to a free port. */
export const DASHBOARD_PORT = 8420;
/** The dashboard listens on the loopback interface unless told otherwise. */
export const DASHBOARD_HOST = '127.0.0.1';

/** Where and how {@link startDashboard} runs. */
export interface DashboardOptions {
  /** The NATS URL, or the URL with credentials and TLS files (a secured cluster's operator). */
  nats: string | NatsClientConfig;
  /** The checkout whose page and `node_modules` are served. */
  root: string;
  host?: string;
  /** Default {@link DASHBOARD_PORT}; 0 picks a free port. */
  port?: number;
  /** When the port is taken, listen on a free one instead of failing (for a default port). */
  fallbackToFreePort?: boolean;
  logger?: LineLogger;
}

/** A running dashboard: its page's URL, and `close()` to stop serving and leave NATS. */
export interface RunningDashboard {
  url: string;
  close(): Promise<void>;
}

/**
 * Starts a dashboard: a NATS connection (reconnecting forever) feeding a {@link DashboardState},
 * and the HTTP server of the page, snapshot, stream and stop endpoints.
 */
export async function startDashboard(options: DashboardOptions): Promise<RunningDashboard> {
  const nc = await connectNats(options.nats, 'tributary-dashboard', options.logger);
  const state = new DashboardState();
  const feed = await startNatsFeed(nc, state, { logger: options.logger });
  const client = new MasterClient(nc, 'tributary-dashboard');
  const serve = (port: number) =>
    new DashboardServer({
      state,
      stopJob: async (jobId) => {
        await client.stopJob(jobId, 'manual');
      },
      files: dashboardFiles(options.root),
      host: options.host ?? DASHBOARD_HOST,
      port,
    });
  let server = serve(options.port ?? DASHBOARD_PORT);
  let url: string;
  try {
    try {
      url = await server.listen();
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE' || !options.fallbackToFreePort) throw err;
      server = serve(0);
      url = await server.listen();
    }
  } catch (err) {
    await feed.stop();
    await nc.close();
    const where = `${options.host ?? DASHBOARD_HOST}:${options.port ?? DASHBOARD_PORT}`;
    throw new Error(`the dashboard cannot listen on ${where}: ${(err as Error).message}`, { cause: err });
  }
  return {
    url,
    async close() {
      await server.close();
      await feed.stop();
      await nc.close();
    },
  };
}
