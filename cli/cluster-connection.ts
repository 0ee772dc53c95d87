import { connectNats, type NatsConnection } from '#libs/messaging';
import { DEFAULT_NATS_URL } from '#libs/config';
import { defaultStateDir, isUrlReachable, readClusterFile } from '#libs/local-cluster';
import type { CliIo } from './cli-io.js';
import { repoRoot } from './repo-root.js';

/** The NATS URL to use: `--nats`, then `NATS_URL`, then the local cluster's, then the default. */
export function natsUrlFor(io: CliIo, flag?: string): string {
  if (flag) return flag;
  if (io.env.NATS_URL) return io.env.NATS_URL;
  return readClusterFile(stateDirFor(io))?.natsUrl ?? DEFAULT_NATS_URL;
}

/** The local cluster's state directory (`TRIBUTARY_STATE_DIR`, default `.tributary` in the checkout). */
export function stateDirFor(io: CliIo): string {
  return io.env.TRIBUTARY_STATE_DIR ?? defaultStateDir(repoRoot());
}

/** Connects to NATS for a CLI command, failing fast with a clear message when nothing answers. */
export async function connectCli(io: CliIo, flag?: string): Promise<NatsConnection> {
  const url = natsUrlFor(io, flag);
  if (!(await isUrlReachable(url))) {
    throw new Error(`no NATS server at ${url}; start a local cluster with \`tributary up\` or set NATS_URL`);
  }
  return connectNats(url, 'tributary-cli');
}
