import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LocalCluster, type ClusterOptions } from '#libs/local-cluster';
import type { TestServers } from './servers.js';
import { ROOT } from './service-process.js';

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
    // Tests keep their data sets and outputs in temporary directories.
    env: {
      TRIBUTARY_BACKEND: 'wasm',
      LOG_LEVEL: 'log',
      TRIBUTARY_DATA_ROOT: tmpdir(),
      TRIBUTARY_OUTPUT_ROOT: tmpdir(),
    },
    say: () => undefined,
    ...overrides,
  });
}
