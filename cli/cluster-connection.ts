import { connectNats, type NatsConnection } from '#libs/messaging';
import {
  DEFAULT_NATS_URL,
  natsServersOf,
  readNatsClientConfig,
  redactedUrl,
  type NatsClientConfig,
} from '#libs/config';
import { defaultStateDir, isUrlReachable, readClusterFile, readEnvFile } from '#libs/local-cluster';
import type { CliIo } from './cli-io.js';
import { repoRoot } from './repo-root.js';

/** The NATS URL to use: `--nats`, then `NATS_URL`, then the local cluster's, then the default. */
export function natsUrlFor(io: CliIo, flag?: string): string {
  if (flag) return flag;
  if (io.env.NATS_URL) return io.env.NATS_URL;
  return readClusterFile(stateDirFor(io))?.natsUrl ?? DEFAULT_NATS_URL;
}

/**
 * The NATS client settings of a CLI command: the URL as {@link natsUrlFor} picks it, and the
 * credentials and TLS files from the environment (`NATS_CREDS`, `NATS_USER`, `NATS_TLS_CA`, ...).
 * When that URL is the local cluster's and it was started with `up --secure`, the cluster lends
 * its operator settings to the variables the environment leaves unset.
 * @throws ConfigErrors naming every bad variable.
 */
export function natsClientFor(io: CliIo, flag?: string): NatsClientConfig {
  const url = natsUrlFor(io, flag);
  const cluster = readClusterFile(stateDirFor(io));
  const ours = cluster?.operatorEnvFile !== undefined && sameServers(url, cluster.natsUrl);
  const lent = ours ? readEnvFile(cluster.operatorEnvFile!) : {};
  const own = Object.fromEntries(Object.entries(io.env).filter(([, v]) => v !== undefined && v.trim() !== ''));
  return readNatsClientConfig({ ...lent, ...own, NATS_URL: url });
}

function sameServers(a: string, b: string): boolean {
  try {
    return natsServersOf(a).join(',') === natsServersOf(b).join(',');
  } catch {
    return false;
  }
}

/** The local cluster's state directory (`TRIBUTARY_STATE_DIR`, default `.tributary` in the checkout). */
export function stateDirFor(io: CliIo): string {
  return io.env.TRIBUTARY_STATE_DIR ?? defaultStateDir(repoRoot());
}

/** Connects to NATS for a CLI command, failing fast with a clear message when nothing answers. */
export async function connectCli(io: CliIo, flag?: string): Promise<NatsConnection> {
  const client = natsClientFor(io, flag);
  if (!(await isUrlReachable(client.natsUrl))) {
    throw new Error(
      `no NATS server at ${redactedUrl(client.natsUrl)}; start a local cluster with \`tributary up\` or set NATS_URL`,
    );
  }
  return connectNats(client, 'tributary-cli');
}
