import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LocalCluster, type ClusterOptions } from '#libs/local-cluster';
import type { TestServers } from './servers.js';
import { ROOT } from './service-process.js';

/** Tests keep their data sets and outputs in temporary directories: the roots services confine jobs to. */
export const TEST_PATH_ROOTS = { TRIBUTARY_DATA_ROOT: tmpdir(), TRIBUTARY_OUTPUT_ROOT: tmpdir() } as const;

/**
 * A local cluster of real service processes on the test's NATS and Redis, with its state and
 * logs under `<servers.dir>/cluster`: by default 1 master, 2 pservers, 2 trainers (WASM) and
 * 1 evaluator, nothing restarted by itself.
 */
export function testCluster(servers: TestServers, overrides: Partial<ClusterOptions> = {}): LocalCluster {
  return new LocalCluster({
    root: ROOT,
    stateDir: join(servers.dir, 'cluster'),
    natsUrl: servers.nats.url,
    redisUrl: servers.redis.url,
    trainers: 2,
    pservers: 2,
    masters: 1,
    evaluators: 1,
    restart: false,
    say: () => undefined,
    ...overrides,
    env: { TRIBUTARY_BACKEND: 'wasm', LOG_LEVEL: 'log', ...TEST_PATH_ROOTS, ...overrides.env },
  });
}
