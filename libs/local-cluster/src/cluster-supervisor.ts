import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdirSync, readFileSync, rmSync, writeFileSync, type WriteStream } from 'node:fs';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { COMMON_CONFIG, redactedUrl } from '#libs/config';
import { connectNats, ensureStreams, type NatsRole } from '#libs/messaging';
import {
  natsClientEnv,
  natsSecureConfig,
  prepareClusterSecurity,
  redisSecureConfig,
  redisSecureTls,
  secureRedisUrl,
  serviceSecurityEnv,
  type ClusterSecurity,
} from './cluster-security.js';
import {
  isUrlReachable,
  startNatsCluster,
  startNatsServer,
  startRedisServer,
  type NatsClusterProcesses,
  type ServerProcess,
} from './server-processes.js';
import { SERVICE_NODE_FLAGS, withServiceMalloc } from './service-node-flags.js';
import { trainerCores, type PinChoice, type TrainerCores } from './trainer-cores.js';

const execFileAsync = promisify(execFile);

/** Roles the supervisor runs, in start order. */
export type ServiceRole = 'pserver' | 'master' | 'evaluator' | 'trainer';

/** How long a service may take to log its readiness line. */
export const SERVICE_READY_TIMEOUT_MS = 60_000;
/** Delay before restarting a service that died, doubled per quick death. */
export const RESTART_BACKOFF_MS = 1_000;

/** What to start. */
export interface ClusterOptions {
  /** Repository root (holds `dist/services/<role>/main.js`). */
  root: string;
  /** State directory: logs, NATS and Redis data, `cluster.json`. */
  stateDir: string;
  natsUrl: string;
  redisUrl: string;
  trainers: number;
  pservers: number;
  masters: number;
  evaluators: number;
  /**
   * NATS servers to start when none answers at `natsUrl` (default 1). More than one start as a
   * cluster with JetStream replicated: node 0 on `natsUrl`'s port, the others on free ports, and
   * every service gets all their URLs and `TRIBUTARY_JS_REPLICAS` = min(3, nodes).
   */
  natsNodes?: number;
  /** Extra environment for every service. */
  env?: Record<string, string>;
  /** Restart a service that exits unexpectedly. */
  restart: boolean;
  /**
   * Run secured (`tributary up --secure`): NATS and Redis are started here (never reused) with
   * TLS and a user per role, made once under `<stateDir>/secure`, and each service gets its
   * role's credentials and certificates.
   */
  secure?: boolean;
  /** Whether each trainer runs on a core of its own (`trainerCores`); `auto` by default. */
  pinTrainers?: PinChoice;
  /** Where progress lines go. */
  say: (line: string) => void;
}

/** One supervised service process. */
export interface ServiceProcessInfo {
  role: ServiceRole;
  index: number;
  id: string;
  pid: number | undefined;
  /** `killed`: stopped by {@link LocalCluster.kill}; it stays down until {@link LocalCluster.startAgain}. */
  state: 'starting' | 'ready' | 'restarting' | 'stopped' | 'exited' | 'killed';
  restarts: number;
  log: string;
  /** The core a trainer is pinned to (`pinTrainers`). */
  core?: number;
}

/** Most copies of a stream a local NATS cluster keeps (3 survives the loss of one node). */
export const MAX_LOCAL_JS_REPLICAS = 3;

/** Thrown by {@link LocalCluster.kill} and friends for an id the cluster does not run. */
export class UnknownServiceError extends Error {
  override readonly name = 'UnknownServiceError';
  constructor(
    readonly id: string,
    known: string[],
  ) {
    super(`no service "${id}" in this cluster; known: ${known.join(', ') || 'none'}`);
  }
}

/** Where trainer `i` is pinned, if it is. */
function pinnedAt(pinning: TrainerCores, i: number): { core: number; taskset: string } | undefined {
  const core = pinning.cores[i];
  return core === undefined || pinning.taskset === undefined ? undefined : { core, taskset: pinning.taskset };
}

/** The file `tributary up` writes so `down` and `ps` find the cluster. */
export interface ClusterFile {
  supervisorPid: number;
  natsUrl: string;
  redisUrl: string;
  /** JetStream replicas of the streams and buckets (`TRIBUTARY_JS_REPLICAS` of the services). */
  jsReplicas?: number;
  startedNats: boolean;
  startedRedis: boolean;
  ready: boolean;
  services: ServiceProcessInfo[];
  /** For a secured cluster: the operator's NATS settings, which the CLI uses when given none. */
  operatorEnvFile?: string;
}

/** Path of the cluster file under a state directory. */
export function clusterFilePath(stateDir: string): string {
  return join(stateDir, 'cluster.json');
}

/** Reads the cluster file, or undefined when no cluster was started from this directory. */
export function readClusterFile(stateDir: string): ClusterFile | undefined {
  try {
    return JSON.parse(readFileSync(clusterFilePath(stateDir), 'utf8')) as ClusterFile;
  } catch {
    return undefined;
  }
}

/** True when a process with this pid exists. */
export function isAlive(pid: number | undefined): boolean {
  if (!pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * The supervisor's environment as its services inherit it. A secured cluster's services get
 * their credentials from the cluster alone, never from the shell (which may hold the operator's).
 */
function inheritedEnv(secure: boolean): NodeJS.ProcessEnv {
  if (!secure) return process.env;
  return Object.fromEntries(Object.entries(process.env).filter(([name]) => !/^(NATS_|REDIS_|PSERVER_TLS_)/.test(name)));
}

class SupervisedService {
  child?: ChildProcess;
  info: ServiceProcessInfo;
  private logStream: WriteStream;
  private stopping = false;
  /** Killed on purpose: no automatic restart until `startAgain`. */
  private held = false;
  private lastStart = 0;

  constructor(
    private readonly opts: ClusterOptions,
    role: ServiceRole,
    index: number,
    private readonly extraEnv: Record<string, string>,
    private readonly onChange: () => void,
    private readonly urls: () => { natsUrl: string; redisUrl: string },
    /** Where a pinned process runs: its core, and the `taskset` that starts it there. */
    private readonly pinned?: { core: number; taskset: string },
  ) {
    const id = `${role}-${index}`;
    const log = join(opts.stateDir, 'logs', `${id}.log`);
    this.logStream = createWriteStream(log, { flags: 'a' });
    this.info = { role, index, id, pid: undefined, state: 'starting', restarts: 0, log };
    if (pinned !== undefined) this.info.core = pinned.core;
  }

  /** Starts the process and resolves once it logged its readiness line. */
  start(): Promise<void> {
    this.lastStart = Date.now();
    const script = join(this.opts.root, 'dist', 'services', this.info.role, 'main.js');
    const child = spawn(process.execPath, [...SERVICE_NODE_FLAGS, script], {
      cwd: this.opts.root,
      env: withServiceMalloc({
        ...inheritedEnv(this.opts.secure === true),
        ...this.opts.env,
        ...this.extraEnv,
        NATS_URL: this.urls().natsUrl,
        REDIS_URL: this.urls().redisUrl,
        NO_COLOR: '1',
      }),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    this.info.pid = child.pid;
    this.info.state = 'starting';
    this.onChange();
    return new Promise((resolveReady, rejectReady) => {
      let ready = false;
      /** The readiness line came; `ready` once the process is pinned too. */
      let logged = false;
      let recent = '';
      const timer = setTimeout(() => {
        if (!ready)
          rejectReady(
            new Error(`${this.info.id} not ready after ${SERVICE_READY_TIMEOUT_MS} ms; see ${this.info.log}`),
          );
      }, SERVICE_READY_TIMEOUT_MS);
      const onData = (buf: Buffer) => {
        this.logStream.write(buf);
        if (logged) return;
        recent = (recent + buf.toString()).slice(-4000);
        if (/\bready\b/.test(recent)) {
          logged = true;
          void this.pinMainThread(child).then(() => {
            // An exit meanwhile was reported as one before readiness.
            if (this.info.pid !== child.pid) return;
            ready = true;
            clearTimeout(timer);
            this.info.state = 'ready';
            this.onChange();
            resolveReady();
          });
        }
      };
      child.stdout?.on('data', onData);
      child.stderr?.on('data', onData);
      child.once('exit', (code, signal) => {
        clearTimeout(timer);
        this.info.pid = undefined;
        if (this.stopping) {
          this.info.state = 'stopped';
          this.onChange();
          return;
        }
        if (this.held) {
          this.heldExit(ready, signal ?? `code ${code}`, rejectReady);
          return;
        }
        this.info.state = 'exited';
        this.opts.say(`${this.info.id} exited (${signal ?? `code ${code}`}); see ${this.info.log}`);
        this.onChange();
        if (!ready)
          rejectReady(
            new Error(`${this.info.id} exited before it was ready: ${recent.trim().split('\n').slice(-3).join(' | ')}`),
          );
        else if (this.opts.restart) this.scheduleRestart();
      });
    });
  }

  /**
   * Holds a pinned process's main thread (whose id is the process's) to its core, once it is
   * ready; threads it starts after, its learner thread among them, are held there with it. V8's
   * own threads, its garbage collector's helpers and its compilers, started with the process,
   * stay free to run on the other cores: held on the trainer's core as well (`taskset -c` at its
   * start), they took 30 of its 1,000 ticks in 10 s of the example's training from the learner,
   * and the example ran at 87,036, 86,954 and 93,683 samples/s against 89,679, 90,288 and 98,732
   * with the main thread alone held. A core that cannot be set is said, and the process runs
   * where the scheduler puts it.
   */
  private async pinMainThread(child: ChildProcess): Promise<void> {
    const pinned = this.pinned;
    if (pinned === undefined || child.pid === undefined) return;
    try {
      await execFileAsync(pinned.taskset, ['-p', '-c', String(pinned.core), String(child.pid)]);
    } catch (err) {
      const why = (err as { stderr?: string }).stderr?.trim() || (err as Error).message;
      this.opts.say(`${this.info.id} not pinned to core ${pinned.core}: ${why}`);
      this.info.core = undefined;
    }
  }

  private scheduleRestart(): void {
    const quick = Date.now() - this.lastStart < 30_000;
    const delay = quick ? Math.min(30_000, RESTART_BACKOFF_MS * 2 ** this.info.restarts) : RESTART_BACKOFF_MS;
    this.info.state = 'restarting';
    this.info.restarts += 1;
    this.onChange();
    setTimeout(() => {
      if (this.stopping) return;
      this.opts.say(`restarting ${this.info.id}`);
      this.start().catch((err: Error) => this.opts.say(err.message));
    }, delay).unref();
  }

  /** Sends `signal` and resolves once the process exited; it is not restarted until `startAgain`. */
  async kill(signal: NodeJS.Signals): Promise<void> {
    this.held = true;
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) {
      this.info.state = 'killed';
      this.onChange();
      return;
    }
    const exited = new Promise<void>((r) => child.once('exit', () => r()));
    this.logStream.write(`--- ${this.info.id}: sent ${signal} (pid ${child.pid}) ---\n`);
    child.kill(signal);
    await exited;
  }

  /** Starts a killed service again with the same settings; resolves when it is ready. */
  startAgain(): Promise<void> {
    if (this.stopping) return Promise.reject(new Error(`${this.info.id} is stopping`));
    if (this.child && this.child.exitCode === null && this.child.signalCode === null) {
      return Promise.reject(new Error(`${this.info.id} is still running (pid ${this.child.pid})`));
    }
    this.held = false;
    this.info.restarts += 1;
    this.logStream.write(`--- ${this.info.id}: started again ---\n`);
    return this.start();
  }

  private heldExit(ready: boolean, how: string, rejectReady: (err: Error) => void): void {
    this.info.state = 'killed';
    this.opts.say(`${this.info.id} killed (${how})`);
    this.onChange();
    if (!ready) rejectReady(new Error(`${this.info.id} was killed before it was ready`));
  }

  /** SIGTERM, then SIGKILL after the grace period. */
  async stop(graceMs = 35_000): Promise<void> {
    this.stopping = true;
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((r) => child.once('exit', () => r()));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    await exited;
    clearTimeout(timer);
    this.logStream.end();
  }
}

/**
 * A local cluster: NATS and Redis (started only when none answers at the configured URLs) and
 * the Tributary services as child processes, restarted when they die unexpectedly.
 */
export class LocalCluster {
  private services: SupervisedService[] = [];
  private nats?: ServerProcess;
  private natsCluster?: NatsClusterProcesses;
  private redis?: ServerProcess;
  private natsUrl: string;
  private redisUrl: string;
  /** Replicas the services give every stream and bucket; from the environment unless we start a NATS cluster. */
  private jsReplicas: number | undefined;
  private ready = false;
  private security?: ClusterSecurity;

  constructor(private readonly opts: ClusterOptions) {
    this.natsUrl = opts.natsUrl;
    this.redisUrl = opts.redisUrl;
    const fromEnv = opts.env?.['TRIBUTARY_JS_REPLICAS'] ?? process.env['TRIBUTARY_JS_REPLICAS'];
    this.jsReplicas = fromEnv ? COMMON_CONFIG.jsReplicas[1].read('TRIBUTARY_JS_REPLICAS', fromEnv, {}) : undefined;
    mkdirSync(join(opts.stateDir, 'logs'), { recursive: true });
  }

  /** Starts everything; resolves when every service logged its readiness line. */
  async start(): Promise<void> {
    const { say } = this.opts;
    const nodes = this.opts.natsNodes ?? 1;
    if (this.opts.secure) {
      if (nodes > 1) throw new Error('--secure runs one NATS server; it cannot be combined with --nats-nodes above 1');
      this.security = await prepareClusterSecurity(this.opts.stateDir, this.natsUrl);
      say(`secured: TLS and a user per role; CA, certificates and passwords in ${this.security.dir}`);
    }
    if (await isUrlReachable(this.natsUrl)) {
      if (this.security)
        throw new Error(`--secure starts its own NATS server, but one already answers at ${this.natsUrl}`);
      say(`using NATS at ${this.natsUrl}`);
    } else {
      const port = Number(new URL(this.natsUrl.split(',')[0]).port || 4222);
      if (nodes > 1) {
        this.natsCluster = await startNatsCluster({ dir: this.opts.stateDir, nodes, port });
        this.natsUrl = this.natsCluster.url;
        this.jsReplicas = Math.min(MAX_LOCAL_JS_REPLICAS, nodes);
        say(
          `started a ${nodes}-node NATS cluster with JetStream (${this.jsReplicas} replicas) on ${this.natsUrl} ` +
            `(pids ${this.natsCluster.nodes.map((n) => n.child.pid).join(', ')})`,
        );
      } else {
        this.nats = await this.startNats(port);
        say(`started nats-server with JetStream on ${this.nats.url} (pid ${this.nats.child.pid})`);
      }
    }
    await this.declareStreams();
    if (await isUrlReachable(this.redisUrl)) {
      if (this.security)
        throw new Error(`--secure starts its own Redis server, but one already answers at ${this.redisUrl}`);
      say(`using Redis at ${redactedUrl(this.redisUrl)}`);
    } else {
      this.redis = await this.startRedis(Number(new URL(this.redisUrl).port || 6379));
      say(`started redis-server on ${this.redis.url} (pid ${this.redis.child.pid})`);
    }
    this.writeFile();
    const pinning = trainerCores(this.opts.pinTrainers ?? 'auto', this.opts.trainers);
    say(pinning.line);
    const plan: [ServiceRole, number, (i: number) => Record<string, string>][] = [
      [
        'pserver',
        this.opts.pservers,
        (i) => ({ PSERVER_SHARD: String(i), PSERVER_DATA_DIR: join(this.opts.stateDir, `pserver-${i}`) }),
      ],
      // Masters are named after their slot, so `ps`, the logs and the leader lease token agree.
      ['master', this.opts.masters, (i) => ({ TRIBUTARY_ID: `master-${i}` })],
      // The evaluator before the trainers: a job queued before `up` is scored from its first
      // snapshots, and the evaluator's start (at its lower priority) does not wait for the cores
      // that busy trainers hold.
      ['evaluator', this.opts.evaluators, () => ({})],
      ['trainer', this.opts.trainers, () => ({})],
    ];
    for (const [role, count, env] of plan) {
      const group = Array.from(
        { length: count },
        (_, i) =>
          new SupervisedService(
            this.opts,
            role,
            i,
            { ...(this.security ? serviceSecurityEnv(this.security, role) : {}), ...env(i), ...this.replicasEnv() },
            () => this.writeFile(),
            () => ({ natsUrl: this.natsUrl, redisUrl: this.serviceRedisUrl() }),
            role === 'trainer' ? pinnedAt(pinning, i) : undefined,
          ),
      );
      this.services.push(...group);
      await Promise.all(group.map((s) => s.start()));
      say(`${count} ${role}${count === 1 ? '' : 's'} ready`);
    }
    this.ready = true;
    this.writeFile();
  }

  /**
   * Creates Tributary's streams right away, so a spec published with a plain `nats pub` is kept
   * even before any service has connected.
   */
  private async declareStreams(): Promise<void> {
    const nc = await connectNats(this.clientConfig('master'), 'tributary-up');
    try {
      await ensureStreams(nc, this.jsReplicas ?? 1);
    } finally {
      await nc.close();
    }
  }

  /** The NATS settings a client of `role` connects with. */
  private clientConfig(role: NatsRole): Parameters<typeof connectNats>[0] {
    if (!this.security) return this.natsUrl;
    const env = natsClientEnv(this.security, role);
    return {
      natsUrl: this.natsUrl,
      natsUser: env.NATS_USER,
      natsPassword: env.NATS_PASSWORD,
      natsTlsCa: env.NATS_TLS_CA,
      natsTlsCert: env.NATS_TLS_CERT,
      natsTlsKey: env.NATS_TLS_KEY,
    };
  }

  /** The Redis URL services use: with the ACL user's credentials when secured. */
  private serviceRedisUrl(): string {
    if (!this.security) return this.redisUrl;
    return secureRedisUrl(this.security, Number(new URL(this.redisUrl).port || 6379));
  }

  private startNats(port: number): Promise<ServerProcess> {
    const dir = join(this.opts.stateDir, 'nats');
    const log = join(this.opts.stateDir, 'logs', 'nats-server.log');
    return startNatsServer({ dir, port, config: this.security ? natsSecureConfig(this.security, log) : undefined });
  }

  private startRedis(port: number): Promise<ServerProcess> {
    const dir = join(this.opts.stateDir, 'redis');
    if (!this.security) return startRedisServer({ dir, port });
    return startRedisServer({
      dir,
      port,
      config: redisSecureConfig(this.security),
      tls: redisSecureTls(this.security),
    });
  }

  /** Stops services in reverse order, then the servers we started. */
  async stop(): Promise<void> {
    const order: ServiceRole[] = ['trainer', 'evaluator', 'master', 'pserver'];
    for (const role of order) {
      await Promise.all(this.services.filter((s) => s.info.role === role).map((s) => s.stop()));
    }
    await this.redis?.stop();
    await this.nats?.stop();
    await this.natsCluster?.stop();
    this.ready = false;
    rmSync(clusterFilePath(this.opts.stateDir), { force: true });
  }

  /** The supervised processes. */
  list(): ServiceProcessInfo[] {
    return this.services.map((s) => ({ ...s.info }));
  }

  /**
   * Sends `signal` (default SIGKILL) to a service (`trainer-0`, `pserver-1`, `master-0`, ...) or
   * to a server the cluster started (`nats`, or `nats-0`, `nats-1`, ... for a NATS cluster, and
   * `redis`) and resolves once it exited. It stays down,
   * whatever `restart` says, until {@link startAgain}.
   * @throws UnknownServiceError for an id the cluster does not run.
   */
  async kill(id: string, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    const server = this.serverById(id);
    if (server) {
      const { child } = server;
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise<void>((r) => child.once('exit', () => r()));
      child.kill(signal);
      await exited;
      this.opts.say(`${id} killed (${signal})`);
      return;
    }
    await this.serviceById(id).kill(signal);
  }

  /**
   * Starts a killed service again with its settings (a pserver keeps its shard and data
   * directory), or a killed server on its port and data directory; resolves when it is ready.
   * @throws UnknownServiceError for an id the cluster does not run.
   */
  async startAgain(id: string): Promise<void> {
    const server = this.serverById(id);
    if (!server) return this.serviceById(id).startAgain();
    if (server.child.exitCode === null && server.child.signalCode === null) {
      throw new Error(`${id} is still running (pid ${server.child.pid})`);
    }
    const node = this.natsNodeIndex(id);
    if (node !== undefined) await this.natsCluster!.restartNode(node);
    else if (id === 'nats') this.nats = await this.startNats(server.port);
    else this.redis = await this.startRedis(server.port);
    this.opts.say(`${id} started again on port ${server.port}`);
    this.writeFile();
  }

  /** The pid of a service or of a server the cluster started; undefined while it is down. */
  pid(id: string): number | undefined {
    const server = this.serverById(id);
    if (server)
      return server.child.exitCode === null && server.child.signalCode === null ? server.child.pid : undefined;
    return this.serviceById(id).info.pid;
  }

  /** `TRIBUTARY_JS_REPLICAS` for the services, when the cluster decides it. */
  private replicasEnv(): Record<string, string> {
    return this.natsCluster && this.jsReplicas ? { TRIBUTARY_JS_REPLICAS: String(this.jsReplicas) } : {};
  }

  /** The node index of `nats-<i>` in the NATS cluster we started, else undefined. */
  private natsNodeIndex(id: string): number | undefined {
    const match = /^nats-(\d+)$/.exec(id);
    if (!match || !this.natsCluster) return undefined;
    const index = Number(match[1]);
    return index < this.natsCluster.nodes.length ? index : undefined;
  }

  private serverById(id: string): ServerProcess | undefined {
    const node = this.natsNodeIndex(id);
    if (node !== undefined) return this.natsCluster!.nodes[node];
    if (id === 'nats' && this.nats) return this.nats;
    if (id === 'redis' && this.redis) return this.redis;
    return undefined;
  }

  private serviceById(id: string): SupervisedService {
    const found = this.services.find((s) => s.info.id === id);
    if (found) return found;
    const known = this.services.map((s) => s.info.id);
    if (this.nats) known.push('nats');
    this.natsCluster?.nodes.forEach((_, i) => known.push(`nats-${i}`));
    if (this.redis) known.push('redis');
    throw new UnknownServiceError(id, known);
  }

  private writeFile(): void {
    const file: ClusterFile = {
      supervisorPid: process.pid,
      natsUrl: this.natsUrl,
      redisUrl: redactedUrl(this.redisUrl),
      ...(this.jsReplicas ? { jsReplicas: this.jsReplicas } : {}),
      startedNats: this.nats !== undefined || this.natsCluster !== undefined,
      startedRedis: this.redis !== undefined,
      ready: this.ready,
      services: this.list(),
      ...(this.security ? { operatorEnvFile: this.security.operatorEnvFile } : {}),
    };
    writeFileSync(clusterFilePath(this.opts.stateDir), JSON.stringify(file, null, 2));
  }
}

/** The default state directory for a repository root. */
export function defaultStateDir(root: string): string {
  return resolve(root, '.tributary');
}
