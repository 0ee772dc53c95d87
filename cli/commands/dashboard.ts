import type { Command } from 'commander';
import { redactedUrl } from '#libs/config';
import { isUrlReachable } from '#libs/local-cluster';
import type { CliIo } from '../cli-io.js';
import { natsClientFor } from '../cluster-connection.js';
import { DASHBOARD_HOST, DASHBOARD_PORT, startDashboard } from '../dashboard/dashboard-app.js';
import { portNumber } from '../option-parsers.js';
import { repoRoot } from '../repo-root.js';

interface DashboardFlags {
  port?: number;
  host: string;
  nats?: string;
}

async function dashboard(io: CliIo, flags: DashboardFlags): Promise<void> {
  const nats = natsClientFor(io, flags.nats);
  const natsUrl = redactedUrl(nats.natsUrl);
  if (!(await isUrlReachable(nats.natsUrl))) {
    throw new Error(`no NATS server at ${natsUrl}; start a local cluster with \`tributary up\` or set NATS_URL`);
  }
  const running = await startDashboard({
    nats,
    root: repoRoot(),
    host: flags.host,
    port: flags.port ?? DASHBOARD_PORT,
    fallbackToFreePort: flags.port === undefined,
    logger: { log: () => undefined, warn: (m) => io.stderr.write(`${m}\n`), error: (m) => io.stderr.write(`${m}\n`) },
  });
  io.stdout.write(`dashboard at ${running.url} (NATS ${natsUrl}); Ctrl-C stops it\n`);
  await new Promise<void>((resolve) => {
    const stop = () => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      resolve();
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
  await running.close();
}

/** Registers `dashboard`. */
export function register(program: Command, io: CliIo): void {
  program
    .command('dashboard')
    .description('serve a live web dashboard of jobs, curves, task queues, trainers, pservers and events')
    .option('--port <port>', `port to listen on (default ${DASHBOARD_PORT}, or a free one if it is taken)`, portNumber)
    .option('--host <host>', 'address to listen on (another than the loopback exposes the stop button)', DASHBOARD_HOST)
    .option('--nats <url>', 'NATS URL (default: NATS_URL, or the local cluster)')
    .action((flags: DashboardFlags) => dashboard(io, flags));
}
