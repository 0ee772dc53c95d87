import {
  AckPolicy,
  DeliverPolicy,
  JetStreamApiError,
  RetentionPolicy,
  StorageType,
  jetstreamManager,
  type JetStreamManager,
  type StreamConfig,
} from '@nats-io/jetstream';
import { Kvm, type KV } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { waitForJetStream, whileJetStreamSettles } from './jetstream-readiness.js';
import { CONSUMERS, KV_BUCKETS, STREAMS } from './subjects.js';

const DAY_NS = 24 * 3600 * 1e9;

const STREAM_CONFIGS: (Partial<StreamConfig> & { name: string })[] = [
  { ...STREAMS.jobs, subjects: [...STREAMS.jobs.subjects], retention: RetentionPolicy.Workqueue },
  { ...STREAMS.control, subjects: [...STREAMS.control.subjects], retention: RetentionPolicy.Workqueue },
  { ...STREAMS.tasks, subjects: [...STREAMS.tasks.subjects], retention: RetentionPolicy.Workqueue },
  { ...STREAMS.events, subjects: [...STREAMS.events.subjects], retention: RetentionPolicy.Limits, max_age: 7 * DAY_NS },
  {
    ...STREAMS.snapshots,
    subjects: [...STREAMS.snapshots.subjects],
    retention: RetentionPolicy.Limits,
    max_age: 1 * DAY_NS,
  },
];

/** How long a member's status entry lives without a refresh. */
export const MEMBERS_BUCKET_TTL_MS = 15_000;

/** Thrown when an existing stream has another replica count than asked and the server refuses to change it. */
export class StreamReplicasError extends Error {
  override readonly name = 'StreamReplicasError';

  constructor(
    readonly stream: string,
    readonly current: number,
    readonly wanted: number,
    options?: ErrorOptions,
  ) {
    const why = (options?.cause as Error | undefined)?.message ?? `it kept ${current}`;
    super(
      `stream ${stream} has ${current} replica(s) but TRIBUTARY_JS_REPLICAS asks for ${wanted}, and the server ` +
        `did not change it (${why}); set TRIBUTARY_JS_REPLICAS=${current}, or run a NATS cluster of at least ` +
        `${wanted} nodes`,
      options,
    );
  }
}

/** Thrown when more than one replica is asked of a NATS server that is not part of a cluster. */
export class JetStreamNotClusteredError extends Error {
  override readonly name = 'JetStreamNotClusteredError';

  constructor(
    readonly server: string,
    readonly wanted: number,
  ) {
    super(
      `TRIBUTARY_JS_REPLICAS asks for ${wanted} replicas, but the NATS server at ${server} is not part of a ` +
        `cluster and keeps one copy of each stream; set TRIBUTARY_JS_REPLICAS=1, or run a NATS cluster of at ` +
        `least ${wanted} nodes`,
    );
  }
}

/**
 * Creates Tributary's streams if they are missing (idempotent; every service may call it), each
 * with `replicas` copies; a stream that exists with another count is changed to it. Waits first
 * for JetStream to answer, as a NATS cluster that just started has no meta leader yet.
 * @throws JetStreamNotClusteredError for more than one replica on a server outside a cluster.
 * @throws StreamReplicasError when the server refuses to give an existing stream `replicas` copies.
 */
export async function ensureStreams(nc: NatsConnection, replicas = 1): Promise<JetStreamManager> {
  checkClustered(nc, replicas);
  const jsm = await waitForJetStream(nc);
  await whileJetStreamSettles(() => declareStreams(jsm, replicas));
  return jsm;
}

async function declareStreams(jsm: JetStreamManager, replicas: number): Promise<void> {
  const existing = new Set<string>();
  for await (const name of jsm.streams.names()) existing.add(name);
  for (const cfg of STREAM_CONFIGS) {
    if (!existing.has(cfg.name)) {
      try {
        await jsm.streams.add({ storage: StorageType.File, num_replicas: replicas, ...cfg });
      } catch (err) {
        // Another service may have created it between our listing and our add.
        if (!(err instanceof JetStreamApiError)) throw err;
        await jsm.streams.info(cfg.name).catch(() => Promise.reject(err));
      }
    }
    await reconcileReplicas(jsm, cfg.name, replicas);
  }
}

/**
 * Refuses more than one replica on a server outside a cluster: it would take the setting and
 * still keep a single copy.
 * @throws StreamReplicasError naming the server.
 */
function checkClustered(nc: NatsConnection, replicas: number): void {
  if (replicas <= 1 || nc.info?.cluster) return;
  throw new JetStreamNotClusteredError(nc.getServer(), replicas);
}

/** Gives an existing stream `replicas` copies if it has another count (a no-op when it has). */
async function reconcileReplicas(jsm: JetStreamManager, stream: string, replicas: number): Promise<void> {
  const { config } = await jsm.streams.info(stream);
  const current = config.num_replicas || 1;
  if (current === replicas) return;
  let updated: number;
  try {
    updated = (await jsm.streams.update(stream, { ...config, num_replicas: replicas })).config.num_replicas || 1;
  } catch (cause) {
    if (!(cause instanceof JetStreamApiError)) throw cause;
    throw new StreamReplicasError(stream, current, replicas, { cause });
  }
  if (updated !== replicas) throw new StreamReplicasError(stream, updated, replicas);
}

/** Creates (if missing) the durable pull consumer the trainers of a job share. */
export async function ensureTrainerConsumer(jsm: JetStreamManager, jobId: string, subject: string): Promise<void> {
  await jsm.consumers.add(STREAMS.tasks.name, {
    durable_name: CONSUMERS.trainers(jobId),
    filter_subject: subject,
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    ack_wait: 30 * 1e9,
    inactive_threshold: 3600 * 1e9,
  });
}

/** The buckets Tributary uses, created if missing. */
export interface Buckets {
  pservers: KV;
  jobs: KV;
  members: KV;
}

/**
 * Opens (creating if missing) the KV buckets, each with `replicas` copies; a bucket that exists
 * with another count is changed to it.
 * @throws JetStreamNotClusteredError for more than one replica on a server outside a cluster.
 * @throws StreamReplicasError when the server refuses to change an existing bucket's replicas.
 */
export async function openBuckets(nc: NatsConnection, replicas = 1): Promise<Buckets> {
  const [pservers, jobs, members] = await Promise.all([
    openBucket(nc, KV_BUCKETS.pservers, replicas),
    openBucket(nc, KV_BUCKETS.jobs, replicas),
    openBucket(nc, KV_BUCKETS.members, replicas, MEMBERS_BUCKET_TTL_MS),
  ]);
  return { pservers, jobs, members };
}

/**
 * JetStream's refusals of a stream's creation when another client created the same stream at the
 * same moment: its name already in use (10058), or, when the two creations crossed inside the
 * server, its subjects overlapping those of the stream just made (10065).
 */
const CREATED_MEANWHILE: ReadonlySet<number> = new Set([10058, 10065]);

/**
 * Runs `create` (a bucket's creation, which checks for the bucket and then adds it), and once
 * more when the server refused the add because another process created the same bucket between
 * the check and the add, as every service does at start: the second call finds it and opens it.
 * @throws what `create` threw otherwise, or what it threw the second time.
 */
export async function onceMoreIfCreatedMeanwhile<T>(create: () => Promise<T>): Promise<T> {
  try {
    return await create();
  } catch (err) {
    if (!(err instanceof JetStreamApiError) || !CREATED_MEANWHILE.has(err.code)) throw err;
    return create();
  }
}

/**
 * Opens (creating if missing) one of Tributary's KV buckets with `replicas` copies (history 1,
 * entries living `ttlMs` when given); an existing bucket with another count is changed to it.
 * @throws JetStreamNotClusteredError for more than one replica on a server outside a cluster.
 * @throws StreamReplicasError when the server refuses that change.
 */
export async function openBucket(nc: NatsConnection, bucket: string, replicas = 1, ttlMs?: number): Promise<KV> {
  checkClustered(nc, replicas);
  return whileJetStreamSettles(async () => {
    const options = { history: 1, replicas, ...(ttlMs === undefined ? {} : { ttl: ttlMs }) };
    const kv = await onceMoreIfCreatedMeanwhile(() => new Kvm(nc).create(bucket, options));
    await reconcileReplicas(await jetstreamManager(nc), `KV_${bucket}`, replicas);
    return kv;
  });
}
