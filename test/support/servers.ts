import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startNatsServer, startRedisServer, type ServerProcess } from '#libs/local-cluster';

/** A real NATS (JetStream) and Redis on ephemeral loopback ports, for one test file. */
export interface TestServers {
  /** The NATS server now running (replaced by a restart; see `server-restart.ts`). */
  nats: ServerProcess;
  /** The Redis server now running (replaced by a restart). */
  redis: ServerProcess;
  dir: string;
  /** Where each server keeps its data (JetStream store, append-only file). */
  dataDirs: { nats: string; redis: string };
  stop(): Promise<void>;
}

/**
 * Starts both servers in a fresh temp dir; `stop` kills them and removes the dir, unless
 * `TRIBUTARY_KEEP_TEST_DIRS` is set (the dir, with every service log, is then kept and named).
 */
export async function startTestServers(): Promise<TestServers> {
  const dir = mkdtempSync(join(tmpdir(), 'tributary-test-'));
  const dataDirs = { nats: join(dir, 'nats'), redis: join(dir, 'redis') };
  const [nats, redis] = await Promise.all([
    startNatsServer({ dir: dataDirs.nats }),
    startRedisServer({ dir: dataDirs.redis }),
  ]);
  const servers: TestServers = {
    nats,
    redis,
    dir,
    dataDirs,
    async stop() {
      await Promise.all([servers.nats.stop(), servers.redis.stop()]);
      if (process.env.TRIBUTARY_KEEP_TEST_DIRS) process.stderr.write(`test servers: kept ${dir}\n`);
      else rmSync(dir, { recursive: true, force: true });
    },
  };
  return servers;
}
