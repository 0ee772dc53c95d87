import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { startNatsServer, startRedisServer } from '#libs/local-cluster';
import { sleep } from '#libs/retry';
import type { TestServers } from './servers.js';

/** How a test server is taken down before it is started again. */
export interface RestartOptions {
  /** SIGTERM (clean shutdown) or SIGKILL (crash). Default SIGTERM. */
  signal?: 'SIGTERM' | 'SIGKILL';
  /** How long the server stays down. Default 2 s. */
  downMs?: number;
  /** Run while the server is down, before it starts again (e.g. to change its data directory). */
  whileDown?: () => void;
}

/** Default time a restarted server stays down. */
export const RESTART_DOWN_MS = 2_000;

/** How long a restarted NATS server may take before its JetStream answers. */
export const JETSTREAM_READY_TIMEOUT_MS = 30_000;

/** Resolves once the JetStream of the server at `url` answers API requests (it recovers its store first). */
export async function waitForJetStream(url: string, timeoutMs = JETSTREAM_READY_TIMEOUT_MS): Promise<void> {
  const nc = await connect({ servers: url, timeout: timeoutMs });
  const deadline = Date.now() + timeoutMs;
  try {
    for (;;) {
      try {
        const jsm = await jetstreamManager(nc, { timeout: 1_000 });
        await jsm.getAccountInfo();
        return;
      } catch (err) {
        if (Date.now() > deadline)
          throw new Error(`JetStream at ${url} not ready after ${timeoutMs} ms`, { cause: err });
        await sleep(200);
      }
    }
  } finally {
    await nc.close();
  }
}

/**
 * Stops one of the test servers and starts it again on the same port with the same data
 * directory (JetStream store, Redis append-only file), so clients reconnect to the same URL and
 * find their state. `servers.nats` or `servers.redis` is replaced by the new process. Resolves
 * once the server answers (for NATS, once its JetStream does).
 */
export async function restartServer(
  servers: TestServers,
  which: 'nats' | 'redis',
  options: RestartOptions = {},
): Promise<void> {
  const old = servers[which];
  const { child } = old;
  if (child.exitCode === null && child.signalCode === null) {
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill(options.signal ?? 'SIGTERM');
    await exited;
  }
  await sleep(options.downMs ?? RESTART_DOWN_MS);
  options.whileDown?.();
  const start = which === 'nats' ? startNatsServer : startRedisServer;
  servers[which] = await start({ dir: servers.dataDirs[which], port: old.port });
  if (which === 'nats') await waitForJetStream(servers.nats.url);
}
