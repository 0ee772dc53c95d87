import { join } from 'node:path';
import type { PserverTls } from '#libs/pserver-protocol';
import { PserverGrpcServer } from '../src/grpc-server.js';
import { ParameterShard, type ParameterShardOptions } from '../src/parameter-shard.js';

/** A running shard: its domain state, its gRPC server and its address. */
export interface RunningShard {
  shard: ParameterShard;
  server: PserverGrpcServer;
  address: string;
  /** Saves, then stops serving. */
  stop(): Promise<void>;
}

/**
 * Starts one parameter server shard inside this process on `host:port` (port 0 picks a free
 * one), with checkpoints under `dataDir`. For tests, benchmarks and single-process setups.
 */
export async function startShard(
  options: Omit<ParameterShardOptions, 'dataDir'> & { dataDir: string; host?: string; port?: number; tls?: PserverTls },
): Promise<RunningShard> {
  const shard = new ParameterShard(options);
  const server = new PserverGrpcServer(shard, {
    host: options.host ?? '127.0.0.1',
    port: options.port ?? 0,
    logger: options.logger,
    tls: options.tls,
  });
  const { address } = await server.start();
  shard.start();
  return {
    shard,
    server,
    address,
    stop: async () => {
      const stopped = server.stop(1_000);
      shard.endWaits();
      await stopped;
      await shard.close();
    },
  };
}

/** Starts `count` shards, shard k checkpointing under `<dataDir>/shard-<k>`. */
export async function startShards(
  count: number,
  options: Omit<ParameterShardOptions, 'shard' | 'dataDir'> & { dataDir: string; host?: string },
): Promise<RunningShard[]> {
  return Promise.all(
    Array.from({ length: count }, (_, k) =>
      startShard({ ...options, shard: k, dataDir: join(options.dataDir, `shard-${k}`) }),
    ),
  );
}
