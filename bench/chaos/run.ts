/**
 * Randomized chaos: starts a local cluster (its own NATS and Redis; 2 masters, one of them a
 * standby, 2 pservers, 2 trainers, 1 evaluator) and a job that runs for `--minutes` (Fashion-MNIST
 * when `data/fashion-mnist/train-*.recordio` exists, else a generated 4-class data set), then,
 * at seeded random intervals, kills a seeded random process (a trainer, a pserver, the leading
 * master, the evaluator or the NATS server) with SIGKILL, restarts it, and measures the time to
 * recover: from the kill until the job makes progress again (every shard's version past the
 * highest seen once the process, or for a master its standby, is back; the next metrics event for
 * the evaluator). At the end it checks the invariants: every task done exactly once per epoch in
 * the master's accounting, every shard's version only going up, the model exported. Run after
 * `npm run build`:
 *
 *   node dist/bench/chaos/run.js [--minutes 5] [--seed 1] [--json] [--keep]
 *
 * Prints a table (kill #, when, what, time to recover) and a summary (median, max); `--json`
 * prints one JSON object instead. Exits 1 when a kill was not recovered from or an invariant was
 * violated. `--keep` keeps the state directory (service logs in `<dir>/cluster/logs/`).
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Kvm } from '@nats-io/kv';
import { LocalCluster, freePort } from '#libs/local-cluster';
import { MasterClient } from '#libs/master-client';
import { KV_BUCKETS, connectNats, type JobEvent, type StopReason } from '#libs/messaging';
import { sleep } from '#libs/retry';
import { CHAOS_CHECKPOINT_SECONDS, chaosJobSpec, writeChaosDataset } from '../../test/support/chaos-job.js';
import { CHAOS_TARGETS, ChaosMonkey, type ChaosTarget, type Recovery } from '../../test/support/chaos-monkey.js';
import { ChaosWaitError, JobEventTap, ShardVersionWatch } from '../../test/support/chaos-watch.js';
import { JobAccountingWatch } from '../../test/support/job-accounting.js';
import { seededRandom } from '../../test/support/tiny-dataset.js';
import { benchPathRoots } from '../cluster/bench-cluster.js';

/** Repository root (this file runs as `dist/bench/chaos/run.js`). */
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const JOB_ID = 'chaos-bench';
const PSERVERS = 2;
/** Shortest and longest pause between one recovery and the next kill. */
const PAUSE_MIN_MS = 5_000;
const PAUSE_MAX_MS = 20_000;
/** No kill starts later than this before the job's end, so its recovery can be seen. */
const LAST_KILL_MARGIN_MS = 40_000;
/** Versions trained before the first kill. */
const WARM_UP_VERSIONS = 20;
/** How long after its budget the job may take to stop and export the model. */
const EXPORT_TIMEOUT_MS = 120_000;

interface KillResult {
  kill: number;
  target: ChaosTarget;
  id: string;
  /** Seconds since the job started. */
  atSeconds: number;
  backSeconds?: number;
  recoverySeconds?: number;
  /** Why no recovery was measured. */
  error?: string;
}

interface Report {
  seed: number;
  minutes: number;
  dataset: string;
  kills: KillResult[];
  summary: { kills: number; recovered: number; medianSeconds: number | null; maxSeconds: number | null };
  stopReason: StopReason | null;
  modelExported: boolean;
  versionSamples: number;
  versionDecreases: { shard: number; from: number; to: number }[];
  accountingProblems: string[];
  epochsSeen: number;
  failures: string[];
}

function median(values: number[]): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** The job spec: Fashion-MNIST from the example spec when converted, else the chaos data set. */
async function jobSpec(dir: string, maxSeconds: number): Promise<{ spec: Record<string, unknown>; dataset: string }> {
  const output = join(dir, 'out');
  const fashion = join(ROOT, 'data', 'fashion-mnist');
  if (existsSync(join(fashion, 'train-00000.recordio'))) {
    const example = JSON.parse(readFileSync(join(ROOT, 'examples', 'fashion-mnist-mlp.json'), 'utf8')) as Record<
      string,
      unknown
    >;
    const dataset = example['dataset'] as Record<string, unknown>;
    delete example['$schema'];
    return {
      dataset: 'fashion-mnist',
      spec: {
        ...example,
        id: JOB_ID,
        dataset: {
          ...dataset,
          train: [join(fashion, 'train-*.recordio')],
          eval: [join(fashion, 'test-*.recordio')],
        },
        training: { mode: 'sync', batchSize: 64, chunksPerTask: 1, maxTaskFailures: 5 },
        checkpoint: { everySeconds: CHAOS_CHECKPOINT_SECONDS },
        evaluation: { everySteps: 50, metric: 'accuracy', maxExamples: 2000 },
        // No target: the job runs for its whole budget.
        stop: { maxSeconds },
        output,
      },
    };
  }
  const data = await writeChaosDataset(join(dir, 'data'));
  return { dataset: 'generated 4-class', spec: chaosJobSpec(JOB_ID, data, output, { maxSeconds }) };
}

function printTable(report: Report): void {
  const rows = report.kills.map((k) => [
    String(k.kill),
    k.atSeconds.toFixed(1),
    k.id,
    k.backSeconds === undefined ? '-' : k.backSeconds.toFixed(1),
    k.recoverySeconds === undefined ? `- (${k.error ?? 'not recovered'})` : k.recoverySeconds.toFixed(1),
  ]);
  const head = ['kill #', 'at s', 'target', 'back s', 'time to recover s'];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!))).join('  ');
  console.log(line(head));
  for (const r of rows) console.log(line(r));
  const s = report.summary;
  const fmt = (v: number | null) => (v === null ? '-' : `${v.toFixed(1)} s`);
  console.log(
    `\n${s.kills} kills, ${s.recovered} recovered; time to recover: median ${fmt(s.medianSeconds)}, max ${fmt(s.maxSeconds)}`,
  );
  console.log(
    `job stopped: ${report.stopReason ?? 'no'}, model exported: ${report.modelExported ? 'yes' : 'no'}; ` +
      `${report.epochsSeen} epochs accounted, ${report.versionSamples} version samples`,
  );
  for (const f of report.failures) console.log(`FAILED: ${f}`);
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      minutes: { type: 'string', default: '5' },
      seed: { type: 'string', default: '1' },
      json: { type: 'boolean', default: false },
      keep: { type: 'boolean', default: false },
    },
  });
  const minutes = Number(values.minutes);
  const seed = Number(values.seed);
  if (!(minutes > 0) || !Number.isInteger(seed))
    throw new RangeError('--minutes must be positive and --seed an integer');
  const say = values.json ? (line: string) => console.error(line) : (line: string) => console.log(line);
  const random = seededRandom(seed);
  const budgetMs = minutes * 60_000;

  const dir = mkdtempSync(join(tmpdir(), 'tributary-chaos-bench-'));
  const natsUrl = `nats://127.0.0.1:${await freePort()}`;
  const cluster = new LocalCluster({
    root: ROOT,
    stateDir: join(dir, 'cluster'),
    natsUrl,
    redisUrl: `redis://127.0.0.1:${await freePort()}`,
    trainers: 2,
    pservers: PSERVERS,
    masters: 2,
    evaluators: 1,
    restart: false,
    env: { LOG_LEVEL: 'log', ...benchPathRoots() },
    say,
  });
  const failures: string[] = [];
  const kills: KillResult[] = [];
  let report: Report | undefined;
  try {
    await cluster.start();
    const nc = await connectNats(natsUrl, 'chaos-bench');
    const kvm = new Kvm(nc);
    const [members, pservers] = await Promise.all([kvm.open(KV_BUCKETS.members), kvm.open(KV_BUCKETS.pservers)]);
    const { spec, dataset } = await jobSpec(dir, budgetMs / 1000);
    const events = new JobEventTap(nc, JOB_ID);
    const versions = new ShardVersionWatch(pservers, JOB_ID, PSERVERS);
    const accounting = new JobAccountingWatch(nc, JOB_ID);
    const monkey = new ChaosMonkey({ cluster, members, versions, accounting, events, say });

    await new MasterClient(nc, 'chaos-bench').submitJob(spec);
    const startedAt = Date.now();
    versions.start();
    accounting.start();
    say(`job ${JOB_ID} (${dataset}) submitted; running for ${minutes} min, seed ${seed}`);
    await versions.waitAbove(WARM_UP_VERSIONS, 120_000, () => events.ended());

    const pause = () => PAUSE_MIN_MS + random() * (PAUSE_MAX_MS - PAUSE_MIN_MS);
    let next = Date.now() + pause();
    while (next < startedAt + budgetMs - LAST_KILL_MARGIN_MS && !events.ended()) {
      await sleep(Math.max(0, next - Date.now()));
      const target = CHAOS_TARGETS[Math.floor(random() * CHAOS_TARGETS.length)]!;
      const index = target === 'nats' || target === 'master' ? 0 : Math.floor(random() * monkey.idsOf(target).length);
      const kill = kills.length + 1;
      const atSeconds = (Date.now() - startedAt) / 1000;
      try {
        const r: Recovery = await monkey.strike(target, { index });
        kills.push({
          kill,
          target,
          id: r.id,
          atSeconds,
          backSeconds: (r.backAt - r.killedAt) / 1000,
          recoverySeconds: r.recoverySeconds,
        });
      } catch (err) {
        const message = (err as Error).message;
        kills.push({ kill, target, id: target, atSeconds, error: message });
        // A job that reached its end during the recovery is no failure of the recovery.
        if (!(err instanceof ChaosWaitError && events.ended())) {
          failures.push(`kill ${kill} (${target}): ${message}`);
          break;
        }
      }
      next = Date.now() + pause();
    }

    let stopReason: StopReason | null = null;
    let modelExported = false;
    try {
      const end = await events.waitFor(
        `job ${JOB_ID}: model exported`,
        (e) => e.type === 'model-exported' || e.type === 'failed',
        0,
        Math.max(0, startedAt + budgetMs - Date.now()) + EXPORT_TIMEOUT_MS,
      );
      modelExported = end.event.type === 'model-exported';
      if (!modelExported) failures.push(`job failed: ${(end.event as Extract<JobEvent, { type: 'failed' }>).error}`);
    } catch (err) {
      failures.push((err as Error).message);
    }
    const stopped = events.first('stopped');
    stopReason = stopped?.reason ?? null;
    await versions.stop();
    await accounting.stop();
    events.stop();
    await nc.close().catch(() => undefined);

    const decreases = versions.decreases().map(({ shard, from, to }) => ({ shard, from, to }));
    const problems = accounting.problems();
    if (decreases.length > 0) failures.push(`shard versions went down: ${JSON.stringify(decreases)}`);
    if (problems.length > 0) failures.push(`accounting: ${problems.join('; ')}`);
    const recovered = kills.flatMap((k) => (k.recoverySeconds === undefined ? [] : [k.recoverySeconds]));
    report = {
      seed,
      minutes,
      dataset,
      kills,
      summary: {
        kills: kills.length,
        recovered: recovered.length,
        medianSeconds: median(recovered),
        maxSeconds: recovered.length ? Math.max(...recovered) : null,
      },
      stopReason,
      modelExported,
      versionSamples: versions.samples,
      versionDecreases: decreases,
      accountingProblems: problems,
      epochsSeen: accounting.accounting().length,
      failures,
    };
  } catch (err) {
    failures.push((err as Error).message);
  } finally {
    await cluster.stop().catch((err: Error) => failures.push(`stopping the cluster: ${err.message}`));
    if (values.keep || failures.length > 0) say(`state kept in ${dir} (logs in ${join(dir, 'cluster', 'logs')})`);
    else rmSync(dir, { recursive: true, force: true });
  }
  if (report) {
    if (values.json) console.log(JSON.stringify(report, null, 2));
    else printTable(report);
  } else {
    for (const f of failures) console.error(`FAILED: ${f}`);
  }
  return failures.length > 0 ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (err: Error) => {
    console.error(err);
    process.exit(1);
  },
);
