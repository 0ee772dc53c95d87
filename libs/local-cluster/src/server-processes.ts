import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { createServer, Socket } from 'node:net';
import { join } from 'node:path';
import { sleep } from '#libs/retry';

/** How long to wait for a started server to accept connections. */
export const SERVER_START_TIMEOUT_MS = 20_000;

/** Largest NATS message the servers we start accept (job specs with big topologies). */
export const NATS_MAX_PAYLOAD_BYTES = 8 * 1024 * 1024;

/** A server process we started, with the URL clients use. */
export interface ServerProcess {
  url: string;
  port: number;
  child: ChildProcess;
  /** Stops the server (SIGTERM, then SIGKILL after a grace period). */
  stop(): Promise<void>;
}

/** Thrown when a server binary is missing or does not come up. */
export class ServerStartError extends Error {
  override readonly name = 'ServerStartError';
}

/** Ports {@link freePort} has handed out in this process. */
const handedOut = new Set<number>();

/**
 * Asks the OS for a free loopback TCP port, never one it handed out before in this process:
 * a port is free again once its probe closes, so two calls in a row (a server's client and
 * route ports) could otherwise get the same one before either server binds it.
 */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = await probePort();
    if (handedOut.has(port)) continue;
    handedOut.add(port);
    return port;
  }
}

function probePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === 'object' && addr ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

/** True when something accepts TCP connections at host:port within `timeoutMs`. */
export function isListening(host: string, port: number, timeoutMs = 500): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = new Socket();
    const done = (ok: boolean) => {
      sock.destroy();
      resolve(ok);
    };
    sock.setTimeout(timeoutMs, () => done(false));
    sock.once('error', () => done(false));
    sock.connect(port, host, () => done(true));
  });
}

/** True when the server named by a `nats://` or `redis://` URL accepts connections. */
export function isUrlReachable(url: string): Promise<boolean> {
  const first = url.split(',')[0].trim();
  const u = new URL(first);
  const defaultPort = u.protocol.startsWith('redis') ? 6379 : 4222;
  return isListening(u.hostname, Number(u.port || defaultPort));
}

async function waitListening(
  name: string,
  host: string,
  port: number,
  child: ChildProcess,
  log: () => string,
): Promise<void> {
  const deadline = Date.now() + SERVER_START_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new ServerStartError(`${name} exited with code ${child.exitCode}: ${log()}`);
    if (await isListening(host, port, 200)) return;
    await sleep(100);
  }
  child.kill('SIGKILL');
  throw new ServerStartError(
    `${name} did not listen on ${host}:${port} within ${SERVER_START_TIMEOUT_MS} ms: ${log()}`,
  );
}

interface ProcessPlan {
  name: string;
  bin: string;
  args: string[];
  host: string;
  port: number;
  url: string;
  /** Words run before `bin` (a wrapper such as `ip netns exec <ns>`). */
  prefix?: string[];
}

function startProcess(plan: ProcessPlan): Promise<ServerProcess> {
  const { name, bin, host, port, url } = plan;
  const [command, ...args] = [...(plan.prefix ?? []), bin, ...plan.args];
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const keep = (b: Buffer) => {
    output = (output + b.toString()).slice(-4000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const started = new Promise<void>((resolve, reject) => {
    child.once('error', (err) =>
      reject(
        new ServerStartError(`cannot run ${command} (${err.message}); install it (Debian: apt-get install ${name})`),
      ),
    );
    child.once('spawn', () => resolve());
  });
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((r) => child.once('exit', () => r()));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(timer);
  };
  return started
    .then(() => waitListening(name, host, port, child, () => output))
    .then(() => ({ url, port, child, stop }));
}

/** Where a clustered NATS node meets the others. */
export interface NatsRouteOptions {
  /** Cluster name, the same on every node. */
  name: string;
  /** This node's name, unique in the cluster (JetStream needs one per node). */
  serverName: string;
  /** Port this node accepts routes from the others on. */
  port: number;
  /** The other nodes' route URLs (`nats-route://host:port`). */
  routes: string[];
}

/** How to start one `nats-server`. */
export interface NatsServerOptions {
  /** Directory of its configuration file and JetStream store. */
  dir: string;
  /** Client port; a free one if omitted. */
  port?: number;
  /** Interface to listen on (clients and routes); default 127.0.0.1. */
  host?: string;
  bin?: string;
  /** Joins a cluster (JetStream clustered, streams replicated across nodes). */
  cluster?: NatsRouteOptions;
  /** Words run before the binary (a wrapper such as `ip netns exec <ns>`). */
  prefix?: string[];
}

/** The configuration file of one `nats-server` with JetStream storing under `store`. */
export function natsServerConfig(opts: {
  host: string;
  port: number;
  store: string;
  cluster?: NatsRouteOptions;
}): string {
  const lines = [
    `listen: "${opts.host}:${opts.port}"`,
    // Older nats-server releases take max_payload only from a config file.
    `max_payload: ${NATS_MAX_PAYLOAD_BYTES}`,
    `jetstream { store_dir: ${JSON.stringify(opts.store)} }`,
  ];
  const cluster = opts.cluster;
  if (cluster) {
    lines.push(
      `server_name: ${JSON.stringify(cluster.serverName)}`,
      'cluster {',
      `  name: ${JSON.stringify(cluster.name)}`,
      `  listen: "${opts.host}:${cluster.port}"`,
      `  routes: [${cluster.routes.map((r) => JSON.stringify(r)).join(', ')}]`,
      '}',
    );
  }
  return `${lines.join('\n')}\n`;
}

/**
 * Starts `nats-server` with JetStream storing under `dir`, on `port` (free one if omitted).
 * `config` is added to its configuration file (users, TLS), which only the owner may read.
 */
export async function startNatsServer(opts: NatsServerOptions & { config?: string }): Promise<ServerProcess> {
  const port = opts.port ?? (await freePort());
  const host = opts.host ?? '127.0.0.1';
  const store = join(opts.dir, 'jetstream');
  mkdirSync(store, { recursive: true });
  const conf = join(opts.dir, 'nats-server.conf');
  writeFileSync(conf, natsServerConfig({ host, port, store, cluster: opts.cluster }) + (opts.config ?? ''), {
    mode: 0o600,
  });
  chmodSync(conf, 0o600);
  return startProcess({
    name: 'nats-server',
    bin: opts.bin ?? 'nats-server',
    args: ['-c', conf],
    host,
    port,
    url: `nats://${host}:${port}`,
    prefix: opts.prefix,
  });
}

/** Name of the NATS cluster `startNatsCluster` starts. */
export const NATS_CLUSTER_NAME = 'tributary';

/** A NATS cluster we started: one server per node, in node order. */
export interface NatsClusterProcesses {
  nodes: ServerProcess[];
  /** Every node's client URL, comma-separated (what `NATS_URL` takes). */
  url: string;
  /** Starts node `index` again, with its port, routes and store; resolves once it listens. */
  restartNode(index: number): Promise<ServerProcess>;
  /** Stops every node. */
  stop(): Promise<void>;
}

/**
 * Starts `nodes` `nats-server`s on loopback as one cluster with JetStream on each (node i named
 * `n<i>`, storing under `<dir>/nats-<i>`, routes on free ports). Node 0 listens for clients on
 * `port` when given; the others on free ports.
 */
export async function startNatsCluster(opts: {
  dir: string;
  nodes: number;
  port?: number;
}): Promise<NatsClusterProcesses> {
  const clientPorts = [opts.port ?? (await freePort())];
  const routePorts: number[] = [];
  for (let i = 0; i < opts.nodes; i++) {
    if (i > 0) clientPorts.push(await freePort());
    routePorts.push(await freePort());
  }
  const nodeOptions = (i: number): NatsServerOptions => ({
    dir: join(opts.dir, `nats-${i}`),
    port: clientPorts[i],
    cluster: {
      name: NATS_CLUSTER_NAME,
      serverName: `n${i}`,
      port: routePorts[i],
      routes: routePorts.filter((_, j) => j !== i).map((p) => `nats-route://127.0.0.1:${p}`),
    },
  });
  const nodes = await Promise.all(clientPorts.map((_, i) => startNatsServer(nodeOptions(i))));
  const cluster: NatsClusterProcesses = {
    nodes,
    url: nodes.map((n) => n.url).join(','),
    async restartNode(index) {
      nodes[index] = await startNatsServer(nodeOptions(index));
      return nodes[index];
    },
    async stop() {
      await Promise.all(nodes.map((n) => n.stop()));
    },
  };
  return cluster;
}

/** TLS of a `redis-server`: PEM files of its certificate, key, and the CA that verifies clients. */
export interface RedisServerTls {
  cert: string;
  key: string;
  ca: string;
  /** Require client certificates the CA signed (mutual TLS). Default false. */
  authClients?: boolean;
}

/** An ACL user of a `redis-server`, allowed every command and key. */
export interface RedisServerUser {
  name: string;
  password: string;
}

/**
 * Starts `redis-server` with the append-only file under `dir`, on `host` (default 127.0.0.1) and
 * `port` (free one if omitted). With `tls` it listens on that port over TLS only (the URL is then
 * `rediss://`); with `users` the default user is off and only those users may log in; `config`
 * adds lines of its own (finer ACLs). The configuration file is readable by the owner only.
 */
export async function startRedisServer(opts: {
  dir: string;
  port?: number;
  host?: string;
  bin?: string;
  /** Words run before the binary (a wrapper such as `ip netns exec <ns>`). */
  prefix?: string[];
  tls?: RedisServerTls;
  users?: readonly RedisServerUser[];
  config?: string;
}): Promise<ServerProcess> {
  const port = opts.port ?? (await freePort());
  const host = opts.host ?? '127.0.0.1';
  mkdirSync(opts.dir, { recursive: true });
  const conf = join(opts.dir, 'redis-server.conf');
  writeFileSync(conf, redisServerConfig(opts), { mode: 0o600 });
  chmodSync(conf, 0o600);
  return startProcess({
    name: 'redis-server',
    bin: opts.bin ?? 'redis-server',
    args: [
      conf,
      ...(opts.tls ? ['--port', '0', '--tls-port', String(port)] : ['--port', String(port)]),
      '--bind',
      host,
      '--dir',
      opts.dir,
      '--appendonly',
      'yes',
      // Every write reaches the append-only file before Redis answers it. With `everysec`, Redis
      // answers writes it may hold back from the file for up to 2 s while an fsync is slow, and a
      // crash then loses writes the master (and the trainers it answered) already acted on.
      '--appendfsync',
      'always',
      '--save',
      '',
      '--daemonize',
      'no',
      // Without a password Redis refuses every address but loopback unless protected mode is off.
      '--protected-mode',
      host === '127.0.0.1' ? 'yes' : 'no',
    ],
    host,
    port,
    url: `${opts.tls ? 'rediss' : 'redis'}://${host}:${port}`,
    prefix: opts.prefix,
  });
}

/** The configuration file of a `redis-server` (see `startRedisServer`). */
function redisServerConfig(opts: {
  tls?: RedisServerTls;
  users?: readonly RedisServerUser[];
  config?: string;
}): string {
  const lines: string[] = [];
  if (opts.tls) {
    lines.push(
      `tls-cert-file ${JSON.stringify(opts.tls.cert)}`,
      `tls-key-file ${JSON.stringify(opts.tls.key)}`,
      `tls-ca-cert-file ${JSON.stringify(opts.tls.ca)}`,
      `tls-auth-clients ${opts.tls.authClients ? 'yes' : 'no'}`,
    );
  }
  const users = opts.users ?? [];
  if (users.length > 0) lines.push('user default off');
  for (const u of users) lines.push(`user ${u.name} on >${u.password} ~* &* +@all`);
  return `${[...lines, opts.config ?? ''].join('\n')}\n`;
}
