/**
 * What the cluster benchmarks share: a local cluster of real service processes with its own NATS
 * and Redis on free ports, the example Fashion-MNIST job, and the members' reports read from
 * the members bucket.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Kvm } from '@nats-io/kv';
import { decodeBatch, type Batch, type RecordLayout } from '#libs/learner';
import { LocalCluster, freePort } from '#libs/local-cluster';
import { TRAINING_MODE_FIELDS } from '#libs/job-spec';
import { MasterClient } from '#libs/master-client';
import {
  KV_BUCKETS,
  connectNats,
  listBucketKeys,
  type JobSummary,
  type MemberStatus,
  type NatsConnection,
} from '#libs/messaging';
import { expandPatterns, scanRecords } from '#libs/recordio';
import { sleep } from '#libs/retry';
import { metricSamples } from '#libs/service-metrics';

/** Repository root (this file runs as `dist/bench/cluster/bench-cluster.js`). */
export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
/** Where the demo and the benchmarks keep Fashion-MNIST as RecordIO. */
export const FASHION_DIR = join(ROOT, 'data', 'fashion-mnist');

/** A running benchmark cluster. */
export interface BenchCluster {
  nc: NatsConnection;
  dir: string;
  /** Stops the services, NATS and Redis, and removes the state directory. */
  stop(): Promise<void>;
}

/**
 * Where benchmark jobs may read and write: their temporary directories, the checkout's `data`
 * and `out`, and Debian's data sets (the services confine job paths to these roots).
 */
export function benchPathRoots(): { TRIBUTARY_DATA_ROOT: string; TRIBUTARY_OUTPUT_ROOT: string } {
  return {
    TRIBUTARY_DATA_ROOT: [tmpdir(), join(ROOT, 'data'), '/usr/share/datasets'].join(':'),
    TRIBUTARY_OUTPUT_ROOT: [tmpdir(), join(ROOT, 'out')].join(':'),
  };
}

/** Starts NATS, Redis, one master, `pservers` shards, `trainers` trainers and `evaluators` evaluators. */
export async function startBenchCluster(
  sizes: { trainers: number; pservers: number; evaluators: number },
  say: (line: string) => void,
): Promise<BenchCluster> {
  const dir = mkdtempSync(join(tmpdir(), 'tributary-bench-'));
  const natsUrl = `nats://127.0.0.1:${await freePort()}`;
  const cluster = new LocalCluster({
    root: ROOT,
    stateDir: join(dir, 'cluster'),
    natsUrl,
    redisUrl: `redis://127.0.0.1:${await freePort()}`,
    masters: 1,
    restart: false,
    say: () => undefined,
    env: benchPathRoots(),
    ...sizes,
  });
  say(`starting ${sizes.trainers} trainer(s), ${sizes.pservers} pserver(s), ${sizes.evaluators} evaluator(s)`);
  try {
    await cluster.start();
  } catch (err) {
    await cluster.stop().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  const nc = await connectNats(natsUrl, 'bench');
  return {
    nc,
    dir,
    stop: async () => {
      await nc.close().catch(() => undefined);
      await cluster.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The record layout of the example job: 784 uint8 pixels scaled to [0, 1], labels 0 to 9. */
export const EXAMPLE_LAYOUT: RecordLayout = {
  featureShape: [784],
  featureDtype: 'uint8',
  scale: 1 / 255,
  labelDtype: 'int32',
  numClasses: 10,
};

/** The records of the RecordIO files matching `pattern`, in file order, at most `limit` of them. */
export async function readRecords(pattern: string, limit = Number.POSITIVE_INFINITY): Promise<Uint8Array[]> {
  const records: Uint8Array[] = [];
  for (const file of await expandPatterns([pattern])) {
    for await (const record of scanRecords(file)) {
      if (records.length === limit) return records;
      records.push(record);
    }
  }
  return records;
}

/**
 * The first `count` minibatches of `batchSize` examples of the converted Fashion-MNIST training
 * records, in file order, decoded as {@link EXAMPLE_LAYOUT}. With `featureBytes` their features
 * stay the records' bytes (`Batch.featureBytes`), as the trainer's reader hands them to a learner
 * that converts them itself; otherwise they are float32.
 */
export async function exampleMinibatches(
  count: number,
  batchSize: number,
  { featureBytes = false }: { featureBytes?: boolean } = {},
): Promise<Batch[]> {
  const records = await readRecords(join(FASHION_DIR, 'train-*.recordio'), count * batchSize);
  if (records.length < count * batchSize) {
    throw new Error(`${FASHION_DIR} holds ${records.length} training records, fewer than ${count * batchSize}`);
  }
  return Array.from({ length: count }, (_, i) =>
    decodeBatch(records.slice(i * batchSize, (i + 1) * batchSize), EXAMPLE_LAYOUT, { featureBytes }),
  );
}

/** `examples/fashion-mnist-mlp.json` as it is. */
export function exampleSpec(): Record<string, unknown> {
  return JSON.parse(readFileSync(join(ROOT, 'examples', 'fashion-mnist-mlp.json'), 'utf8')) as Record<string, unknown>;
}

/** The `training` fields that choose a mode or belong to one. */
const MODE_FIELDS = new Set(['mode', ...Object.values(TRAINING_MODE_FIELDS).flatMap((fields) => Object.keys(fields))]);

/**
 * The example's `training` with `changes`: as it is when they are empty; otherwise its fields of
 * no mode (batch size, task size) with `changes` over them, so that a run in another mode does
 * not carry the fields of the example's own (which the job spec refuses).
 */
export function exampleTraining(changes: Record<string, unknown>): Record<string, unknown> {
  const own = exampleSpec()['training'] as Record<string, unknown>;
  if (Object.keys(changes).length === 0) return own;
  return { ...Object.fromEntries(Object.entries(own).filter(([field]) => !MODE_FIELDS.has(field))), ...changes };
}

/**
 * `examples/fashion-mnist-mlp.json` as job `id`, reading the converted data set and writing
 * under `outputDir`, with `changes` merged over its top-level fields.
 */
export function exampleJob(
  id: string,
  outputDir: string,
  changes: Record<string, unknown> = {},
): Record<string, unknown> {
  if (!existsSync(join(FASHION_DIR, 'train-00000.recordio'))) {
    throw new Error(
      `no Fashion-MNIST RecordIO in ${FASHION_DIR}; run: npx tributary dataset convert fashion-mnist --out data/fashion-mnist`,
    );
  }
  const example = exampleSpec();
  delete example['$schema'];
  const dataset = example['dataset'] as Record<string, unknown>;
  return {
    ...example,
    id,
    dataset: {
      ...dataset,
      train: [join(FASHION_DIR, 'train-*.recordio')],
      eval: [join(FASHION_DIR, 'test-*.recordio')],
    },
    output: join(outputDir, id),
    ...changes,
  };
}

/** Submits a job spec through the jobs stream. */
export async function submit(nc: NatsConnection, spec: Record<string, unknown>): Promise<void> {
  await new MasterClient(nc, 'bench').submitJob(spec);
}

/** Every member's latest status. */
export async function members(nc: NatsConnection): Promise<MemberStatus[]> {
  const kv = await new Kvm(nc).create(KV_BUCKETS.members, { history: 1 });
  const found: MemberStatus[] = [];
  for (const key of await listBucketKeys(nc, KV_BUCKETS.members)) {
    const entry = await kv.get(key);
    if (entry?.operation === 'PUT') found.push(entry.json<MemberStatus>());
  }
  return found;
}

/** Training throughput over a steady window, and where the steps' time went. */
export interface SteadyThroughput {
  /** Samples per second of all trainers together over the window (their counters' increase). */
  samplesPerSecond: number;
  /** Each trainer's samples per second over the window. */
  perTrainer: number[];
  /**
   * The same total as the trainers report it (`samplesPerSecond` of their status, a trailing
   * mean over the last 10 s), averaged over the window's reports: its first reports still count
   * steps from before the window.
   */
  reportedSamplesPerSecond: number;
  /** Mean milliseconds per step of each phase, over the trainers and the window. */
  trainerPhases: Record<string, number>;
  /** The same for the pservers (barrier, update). */
  pserverPhases: Record<string, number>;
}

/** Samples each training trainer has trained on so far (its `tributary_trainer_samples_total`), by id. */
async function trainedSamples(nc: NatsConnection): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  for (const m of await members(nc)) {
    if (m.role !== 'trainer' || m.jobId === undefined) continue;
    counts.set(m.id, await trainerSamples(m));
  }
  return counts;
}

/** Samples `trainer` has trained on so far, off its metrics page (`tributary_trainer_samples_total`). */
export async function trainerSamples(trainer: MemberStatus): Promise<number> {
  if (trainer.metricsUrl === undefined) throw new Error(`trainer ${trainer.id} reports no metrics address`);
  const page = await fetch(trainer.metricsUrl);
  if (!page.ok) throw new Error(`trainer ${trainer.id}: ${trainer.metricsUrl} answered ${page.status}`);
  return metricSamples(await page.text(), 'tributary_trainer_samples_total').reduce((n, s) => n + s.value, 0);
}

/**
 * Waits until `trainers` trainers report training, then `warmUpMs` more, then measures for
 * `windowMs`: each trainer's samples are read off its samples counter at the window's start and
 * end, and the members' reports are sampled every `everyMs` for the step phases.
 */
export async function steadyThroughput(
  nc: NatsConnection,
  options: { trainers: number; warmUpMs: number; windowMs: number; everyMs?: number; say: (line: string) => void },
): Promise<SteadyThroughput> {
  const everyMs = options.everyMs ?? 2_000;
  const deadline = Date.now() + 120_000;
  for (;;) {
    const training = (await members(nc)).filter((m) => m.role === 'trainer' && (m.samplesPerSecond ?? 0) > 0);
    if (training.length >= options.trainers) break;
    if (Date.now() > deadline)
      throw new Error(`only ${training.length} of ${options.trainers} trainers trained within 120 s`);
    await sleep(500);
  }
  options.say(`training; warming up for ${options.warmUpMs / 1000} s`);
  await sleep(options.warmUpMs);
  const startedAt = performance.now();
  const atStart = await trainedSamples(nc);
  const totals: number[] = [];
  const phases = { trainer: new Map<string, number[]>(), pserver: new Map<string, number[]>() };
  const end = Date.now() + options.windowMs;
  while (Date.now() < end) {
    const seen = await members(nc);
    const trainers = seen.filter((m) => m.role === 'trainer' && m.jobId !== undefined);
    totals.push(trainers.reduce((n, m) => n + (m.samplesPerSecond ?? 0), 0));
    for (const m of seen) {
      const into = m.role === 'trainer' ? phases.trainer : m.role === 'pserver' ? phases.pserver : undefined;
      for (const [phase, ms] of Object.entries(m.stepPhases ?? {})) into?.set(phase, [...(into.get(phase) ?? []), ms]);
    }
    options.say(`measuring: ${Math.round(totals.at(-1)!)} samples/s (${Math.ceil((end - Date.now()) / 1000)} s left)`);
    await sleep(Math.min(everyMs, Math.max(0, end - Date.now())));
  }
  const atEnd = await trainedSamples(nc);
  const seconds = (performance.now() - startedAt) / 1000;
  // A trainer that joined within the window counts all it trained; one that left it cannot be
  // read at the end, and counts nothing.
  const perTrainer = [...atEnd].map(([id, samples]) => (samples - (atStart.get(id) ?? 0)) / seconds);
  return {
    samplesPerSecond: perTrainer.reduce((a, b) => a + b, 0),
    perTrainer,
    reportedSamplesPerSecond: mean(totals),
    trainerPhases: meanOf(phases.trainer),
    pserverPhases: meanOf(phases.pserver),
  };
}

/** Waits for the job's `summary.json` in `outputDir/<id>`. */
export async function waitForSummary(outputDir: string, id: string, timeoutMs: number): Promise<JobSummary> {
  const file = join(outputDir, id, 'summary.json');
  const deadline = Date.now() + timeoutMs;
  while (!existsSync(file)) {
    if (Date.now() > deadline) throw new Error(`job ${id} wrote no summary within ${timeoutMs / 1000} s`);
    await sleep(500);
  }
  return JSON.parse(readFileSync(file, 'utf8')) as JobSummary;
}

/** The phases as one line: `train 8.1 · push 4.5 · ...` (ms per step). */
export function formatPhases(phases: Record<string, number>): string {
  const entries = Object.entries(phases);
  return entries.length === 0 ? 'not reported' : entries.map(([k, v]) => `${k} ${v.toFixed(2)}`).join(' · ');
}

function mean(values: number[]): number {
  return values.length === 0 ? 0 : values.reduce((a, b) => a + b, 0) / values.length;
}

function meanOf(byKey: Map<string, number[]>): Record<string, number> {
  return Object.fromEntries([...byKey].map(([k, v]) => [k, Math.round(mean(v) * 100) / 100]));
}
