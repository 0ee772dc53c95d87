import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
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

/** Asks the OS for a free loopback TCP port. */
export async function freePort(): Promise<number> {
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

async function waitListening(name: string, port: number, child: ChildProcess, log: () => string): Promise<void> {
  const deadline = Date.now() + SERVER_START_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new ServerStartError(`${name} exited with code ${child.exitCode}: ${log()}`);
    if (await isListening('127.0.0.1', port, 200)) return;
    await sleep(100);
  }
  child.kill('SIGKILL');
  throw new ServerStartError(`${name} did not listen on port ${port} within ${SERVER_START_TIMEOUT_MS} ms: ${log()}`);
}

function startProcess(name: string, bin: string, args: string[], port: number, url: string): Promise<ServerProcess> {
  const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const keep = (b: Buffer) => {
    output = (output + b.toString()).slice(-4000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const started = new Promise<void>((resolve, reject) => {
    child.once('error', (err) =>
      reject(new ServerStartError(`cannot run ${bin} (${err.message}); install it (Debian: apt-get install ${name})`)),
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
  return started.then(() => waitListening(name, port, child, () => output)).then(() => ({ url, port, child, stop }));
}

/** Starts `nats-server` with JetStream storing under `dir`, on `port` (free one if omitted). */
export async function startNatsServer(opts: { dir: string; port?: number; bin?: string }): Promise<ServerProcess> {
  const port = opts.port ?? (await freePort());
  const store = join(opts.dir, 'jetstream');
  mkdirSync(store, { recursive: true });
  // Older nats-server releases take max_payload only from a config file.
  const conf = join(opts.dir, 'nats-server.conf');
  writeFileSync(conf, `max_payload: ${NATS_MAX_PAYLOAD_BYTES}\n`);
  return startProcess(
    'nats-server',
    opts.bin ?? 'nats-server',
    ['-c', conf, '-js', '-a', '127.0.0.1', '-p', String(port), '-sd', store],
    port,
    `nats://127.0.0.1:${port}`,
  );
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
 * Starts `redis-server` with the append-only file under `dir`, on `port` (free one if omitted).
 * With `tls` it listens on that port over TLS only (the URL is then `rediss://`); with `users`
 * the default user is off and only those users may log in.
 */
export async function startRedisServer(opts: {
  dir: string;
  port?: number;
  bin?: string;
  tls?: RedisServerTls;
  users?: readonly RedisServerUser[];
}): Promise<ServerProcess> {
  const port = opts.port ?? (await freePort());
  mkdirSync(opts.dir, { recursive: true });
  const listen = opts.tls
    ? [
        '--port',
        '0',
        '--tls-port',
        String(port),
        '--tls-cert-file',
        opts.tls.cert,
        '--tls-key-file',
        opts.tls.key,
        '--tls-ca-cert-file',
        opts.tls.ca,
        '--tls-auth-clients',
        opts.tls.authClients ? 'yes' : 'no',
      ]
    : ['--port', String(port)];
  const users = (opts.users ?? []).flatMap((u) => ['--user', u.name, 'on', `>${u.password}`, '~*', '&*', '+@all']);
  return startProcess(
    'redis-server',
    opts.bin ?? 'redis-server',
    [
      ...listen,
      '--bind',
      '127.0.0.1',
      '--dir',
      opts.dir,
      '--appendonly',
      'yes',
      '--appendfsync',
      'everysec',
      '--save',
      '',
      '--daemonize',
      'no',
      '--protected-mode',
      'yes',
      ...(users.length > 0 ? ['--user', 'default', 'off', ...users] : []),
    ],
    port,
    `${opts.tls ? 'rediss' : 'redis'}://127.0.0.1:${port}`,
  );
}
