import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startNatsServer, startRedisServer, type ServerProcess } from '#libs/local-cluster';

/** A real NATS (JetStream) and Redis on ephemeral loopback ports, for one test file. */
export interface TestServers {
  nats: ServerProcess;
  redis: ServerProcess;
  dir: string;
  stop(): Promise<void>;
}

/** Starts both servers in a fresh temp dir; `stop` kills them and removes the dir. */
export async function startTestServers(): Promise<TestServers> {
  const dir = mkdtempSync(join(tmpdir(), 'tributary-test-'));
  const [nats, redis] = await Promise.all([
    startNatsServer({ dir: join(dir, 'nats') }),
    startRedisServer({ dir: join(dir, 'redis') }),
  ]);
  return {
    nats,
    redis,
    dir,
    async stop() {
      await Promise.all([nats.stop(), redis.stop()]);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
