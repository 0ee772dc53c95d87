import { Option, type Command } from 'commander';
import { spawn } from 'node:child_process';
import { mkdirSync, openSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_NATS_URL, DEFAULT_REDIS_URL } from '#libs/config';
import {
  LocalCluster,
  PIN_CHOICES,
  isAlive,
  readClusterFile,
  type ClusterFile,
  type PinChoice,
} from '#libs/local-cluster';
import { KV_BUCKETS, listBucketKeys, type MemberStatus } from '#libs/messaging';
import { sleep } from '#libs/retry';
import { Kvm } from '@nats-io/kv';
import { CommandExit, type CliIo } from '../cli-io.js';
import { connectCli, natsClientFor, stateDirFor } from '../cluster-connection.js';
import { DASHBOARD_PORT, startDashboard, type RunningDashboard } from '../dashboard/dashboard-app.js';
import { readDashboardFile, removeDashboardFile, writeDashboardFile } from '../dashboard/dashboard-file.js';
import { portNumber, positiveInteger } from '../option-parsers.js';
import { repoRoot } from '../repo-root.js';
import { formatTable } from '../table.js';

/** How long `up --detach` waits for the cluster to become ready. */
const DETACHED_READY_TIMEOUT_MS = 180_000;
/** How long `up --detach` waits for the dashboard once the cluster is ready. */
const DASHBOARD_START_TIMEOUT_MS = 15_000;

interface UpFlags {
  trainers: number;
  pservers: number;
  masters: number;
  natsNodes: number;
  pinTrainers: PinChoice;
  detach?: boolean;
  restart: boolean;
  /** False with `--no-dashboard`. */
  dashboard: boolean;
  dashboardPort?: number;
  secure?: boolean;
}

/** Serves the cluster's dashboard beside it and records its URL; a dashboard that cannot start is reported, not fatal. */
async function serveDashboard(io: CliIo, flags: UpFlags): Promise<RunningDashboard | undefined> {
  const stateDir = stateDirFor(io);
  try {
    const running = await startDashboard({
      // The cluster's own URLs, with its operator's credentials when it is secured.
      nats: natsClientFor(io, readClusterFile(stateDir)?.natsUrl),
      root: repoRoot(),
      port: flags.dashboardPort ?? DASHBOARD_PORT,
      fallbackToFreePort: flags.dashboardPort === undefined,
    });
    writeDashboardFile(stateDir, { url: running.url, supervisorPid: process.pid });
    return running;
  } catch (err) {
    io.stderr.write(`no dashboard: ${(err as Error).message}\n`);
    return undefined;
  }
}

async function upForeground(io: CliIo, flags: UpFlags): Promise<void> {
  const stateDir = stateDirFor(io);
  const running = readClusterFile(stateDir);
  if (running && isAlive(running.supervisorPid)) {
    throw new Error(`a cluster is already running (pid ${running.supervisorPid}); stop it with \`tributary down\``);
  }
  const say = (line: string) => io.stderr.write(`${line}\n`);
  const cluster = new LocalCluster({
    root: repoRoot(),
    stateDir,
    natsUrl: io.env.NATS_URL ?? DEFAULT_NATS_URL,
    redisUrl: io.env.REDIS_URL ?? DEFAULT_REDIS_URL,
    trainers: flags.trainers,
    pservers: flags.pservers,
    masters: flags.masters,
    natsNodes: flags.natsNodes,
    pinTrainers: flags.pinTrainers,
    evaluators: 1,
    restart: flags.restart,
    secure: flags.secure === true,
    say,
  });
  let stopping: Promise<void> | undefined;
  let dashboard: RunningDashboard | undefined;
  const stop = () => {
    stopping ??= (async () => {
      say('stopping the cluster...');
      removeDashboardFile(stateDir);
      await dashboard?.close().catch(() => undefined);
      await cluster.stop();
      say('cluster stopped');
      process.exit(0);
    })();
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  try {
    await cluster.start();
  } catch (err) {
    say(`cluster failed to start: ${(err as Error).message}`);
    await cluster.stop();
    throw new CommandExit(1);
  }
  if (flags.dashboard) {
    dashboard = await serveDashboard(io, flags);
  }
  say(
    `cluster ready: 1 master${flags.masters > 1 ? ` (+${flags.masters - 1} standby)` : ''}, ${flags.pservers} pservers, ` +
      `${flags.trainers} trainers, 1 evaluator ` +
      `(logs in ${join(stateDir, 'logs')}); Ctrl-C stops it`,
  );
  if (dashboard) say(`dashboard at ${dashboard.url}`);
  if (flags.secure) say(secureClusterHint(stateDir));
  await new Promise<never>(() => undefined);
}

/** How to reach a secured cluster from elsewhere than this checkout's CLI. */
function secureClusterHint(stateDir: string): string {
  const file = readClusterFile(stateDir)?.operatorEnvFile;
  return (
    `secured: this checkout's \`tributary\` commands use the operator's credentials by themselves; ` +
    `for other NATS clients, \`source ${file}\``
  );
}

async function upDetached(io: CliIo, flags: UpFlags): Promise<void> {
  const stateDir = stateDirFor(io);
  mkdirSync(join(stateDir, 'logs'), { recursive: true });
  const logFile = join(stateDir, 'logs', 'supervisor.log');
  const out = openSync(logFile, 'a');
  const args = [
    process.argv[1],
    'up',
    '--trainers',
    String(flags.trainers),
    '--pservers',
    String(flags.pservers),
    '--masters',
    String(flags.masters),
    '--nats-nodes',
    String(flags.natsNodes),
    '--pin-trainers',
    flags.pinTrainers,
    ...(flags.restart ? [] : ['--no-restart']),
    ...(flags.dashboard ? [] : ['--no-dashboard']),
    ...(flags.dashboardPort === undefined ? [] : ['--dashboard-port', String(flags.dashboardPort)]),
    ...(flags.secure ? ['--secure'] : []),
  ];
  const child = spawn(process.execPath, args, { detached: true, stdio: ['ignore', out, out], env: { ...process.env } });
  child.unref();
  const deadline = Date.now() + DETACHED_READY_TIMEOUT_MS;
  let dashboardDeadline = Infinity;
  while (Date.now() < deadline) {
    await sleep(300);
    const file = readClusterFile(stateDir);
    // The dashboard is served once the cluster is ready; one that could not start is in the log.
    const dashboard = readDashboardFile(stateDir);
    const served = dashboard?.supervisorPid === child.pid ? dashboard : undefined;
    if (
      file?.ready &&
      file.supervisorPid === child.pid &&
      (served || !flags.dashboard || Date.now() > dashboardDeadline)
    ) {
      io.stdout.write(
        `cluster ready (supervisor pid ${child.pid}; logs in ${join(stateDir, 'logs')}); stop it with \`tributary down\`\n`,
      );
      io.stdout.write(
        served ? `dashboard at ${served.url}\n` : flags.dashboard ? `no dashboard; see ${logFile}\n` : '',
      );
      if (flags.secure) io.stdout.write(`${secureClusterHint(stateDir)}\n`);
      return;
    }
    if (file?.ready && file.supervisorPid === child.pid)
      dashboardDeadline = Math.min(dashboardDeadline, Date.now() + DASHBOARD_START_TIMEOUT_MS);
    if (!isAlive(child.pid)) {
      throw new Error(`the cluster did not start; see ${logFile}`);
    }
  }
  throw new Error(`the cluster was not ready after ${DETACHED_READY_TIMEOUT_MS / 1000} s; see ${logFile}`);
}

async function down(io: CliIo): Promise<void> {
  const stateDir = stateDirFor(io);
  const file = readClusterFile(stateDir);
  if (!file || !isAlive(file.supervisorPid)) {
    io.stdout.write('no local cluster is running\n');
    return;
  }
  process.kill(file.supervisorPid, 'SIGTERM');
  const deadline = Date.now() + 90_000;
  while (isAlive(file.supervisorPid)) {
    if (Date.now() > deadline) throw new Error(`cluster supervisor ${file.supervisorPid} did not stop within 90 s`);
    await sleep(200);
  }
  io.stdout.write('cluster stopped\n');
}

/** Rows for `ps`: live members from NATS, plus local processes the supervisor knows. */
export interface PsRow {
  role: string;
  id: string;
  pid: number | null;
  /** The CPUs it may run on, as a Linux CPU list (`0`: a trainer pinned to core 0); '' if unknown. */
  cpus: string;
  host: string;
  state: string;
  job: string;
  task: string;
  backend: string;
  /** Which versions of our kernels it runs (`wasm-simd` or `js`), where it has a choice. */
  kernels: string;
  samplesPerSecond: number | null;
  shard: number | null;
  versions: Record<string, number> | null;
  /** Mean milliseconds per step of each phase, as the member last reported (see `MemberStatus`). */
  stepPhases: Record<string, number> | null;
  /** Where the process serves its Prometheus metrics (`/healthz` and `/readyz` beside it). */
  metricsUrl: string;
}

async function readMembers(io: CliIo, natsFlag?: string): Promise<MemberStatus[]> {
  const nc = await connectCli(io, natsFlag);
  try {
    const kv = await new Kvm(nc).create(KV_BUCKETS.members, { history: 1 });
    const members: MemberStatus[] = [];
    for (const key of await listBucketKeys(nc, KV_BUCKETS.members)) {
      const entry = await kv.get(key);
      if (!entry || entry.operation !== 'PUT') continue;
      try {
        members.push(entry.json<MemberStatus>());
      } catch {
        // A malformed entry is not ours to show.
      }
    }
    return members;
  } finally {
    await nc.close();
  }
}

function psRows(members: MemberStatus[], local: ClusterFile | undefined): PsRow[] {
  const order = ['master', 'pserver', 'trainer', 'evaluator'];
  const rows: PsRow[] = members.map((m) => ({
    role: m.role,
    id: m.id,
    pid: m.pid,
    cpus: m.cpus ?? '',
    host: m.host,
    state: m.state,
    job: m.jobId ?? '',
    task: m.taskId === undefined ? '' : String(m.taskId),
    backend: m.backend ?? '',
    kernels: m.kernels ?? '',
    samplesPerSecond: m.samplesPerSecond ?? null,
    shard: m.shard ?? null,
    versions: m.versions ?? null,
    stepPhases: m.stepPhases ?? null,
    metricsUrl: m.metricsUrl ?? '',
  }));
  const livePids = new Set(rows.map((r) => r.pid));
  for (const s of local?.services ?? []) {
    if (s.pid !== undefined && livePids.has(s.pid)) continue;
    if (s.state === 'ready' && s.pid !== undefined) continue; // starting up, not yet in the bucket
    rows.push({
      role: s.role,
      id: s.id,
      pid: s.pid ?? null,
      cpus: s.core === undefined ? '' : String(s.core),
      host: 'local',
      state: s.state,
      job: '',
      task: '',
      backend: '',
      kernels: '',
      samplesPerSecond: null,
      shard: null,
      versions: null,
      stepPhases: null,
      metricsUrl: '',
    });
  }
  return rows.sort((a, b) => order.indexOf(a.role) - order.indexOf(b.role) || a.id.localeCompare(b.id));
}

async function ps(io: CliIo, flags: { json?: boolean; nats?: string }): Promise<void> {
  const local = readClusterFile(stateDirFor(io));
  const rows = psRows(await readMembers(io, flags.nats), local && isAlive(local.supervisorPid) ? local : undefined);
  if (flags.json) {
    io.stdout.write(`${JSON.stringify(rows, null, 2)}\n`);
    return;
  }
  if (rows.length === 0) {
    io.stdout.write('no Tributary processes are running\n');
    return;
  }
  const columns = [
    'ROLE',
    'ID',
    'PID',
    'CPUS',
    'STATE',
    'JOB',
    'TASK',
    'BACKEND',
    'KERNELS',
    'SAMPLES/S',
    'SHARD',
    'VERSION',
    'METRICS',
  ].map((heading) => ({
    heading,
    numeric: ['PID', 'SAMPLES/S', 'SHARD', 'TASK'].includes(heading),
  }));
  const lines = formatTable(
    columns,
    rows.map((r) => [
      r.role,
      r.id,
      r.pid === null ? '' : String(r.pid),
      r.cpus,
      r.state,
      r.job,
      r.task,
      r.backend,
      r.kernels,
      r.samplesPerSecond === null ? '' : r.samplesPerSecond.toFixed(0),
      r.shard === null ? '' : String(r.shard),
      r.versions
        ? Object.entries(r.versions)
            .map(([job, v]) => (Object.keys(r.versions!).length > 1 ? `${job}:${v}` : String(v)))
            .join(' ')
        : '',
      r.metricsUrl,
    ]),
  );
  io.stdout.write(`${lines.join('\n')}\n`);
}

/** Registers `up`, `down` and `ps`. */
export function register(program: Command, io: CliIo): void {
  program
    .command('up')
    .description(
      'start a local cluster: NATS and Redis if none answers, then master, pservers, trainers and an evaluator',
    )
    .option(
      '--trainers <n>',
      `number of trainer processes (default: one per core, ${availableParallelism()} here)`,
      positiveInteger,
    )
    .option('--pservers <n>', 'number of parameter-server shards', positiveInteger, 2)
    .option('--masters <n>', 'number of masters (more than one starts standbys)', positiveInteger, 1)
    .option(
      '--nats-nodes <n>',
      'NATS servers to start when none answers: more than one form a cluster with JetStream replicated (3 keeps working when one is lost)',
      positiveInteger,
      1,
    )
    .addOption(
      new Option(
        '--pin-trainers <when>',
        "run each trainer on a core of its own, so its model stays in that core's caches: auto does when there " +
          'is a core for each (Linux, with taskset), on always (round-robin), off never',
      )
        .choices(PIN_CHOICES)
        .default('auto'),
    )
    .option('--detach', 'start in the background and return once ready')
    .option('--no-restart', 'do not restart services that exit unexpectedly')
    .option(
      '--dashboard-port <port>',
      `port of the dashboard (default ${DASHBOARD_PORT}, or a free one if it is taken)`,
      portNumber,
    )
    .option('--no-dashboard', 'do not serve the dashboard')
    .option(
      '--secure',
      'run secured: TLS everywhere, a NATS user per role with only the subjects it needs, a Redis ACL user ' +
        '(CA, certificates and passwords made once in the state directory)',
    )
    .action(async (given: Omit<UpFlags, 'trainers'> & { trainers?: number }) => {
      // A WASM trainer uses one core, so one per core keeps every core busy.
      const flags: UpFlags = { ...given, trainers: given.trainers ?? availableParallelism() };
      if (flags.detach) await upDetached(io, flags);
      else await upForeground(io, flags);
    });
  program
    .command('down')
    .description('stop a local cluster started with `tributary up --detach`')
    .action(() => down(io));
  program
    .command('ps')
    .description("list Tributary's processes: role, id, pid, state, and each trainer's task and each pserver's shard")
    .option('--json', 'print JSON')
    .option('--nats <url>', 'NATS URL (default: NATS_URL, or the local cluster)')
    .action((flags: { json?: boolean; nats?: string }) => ps(io, flags));
}
