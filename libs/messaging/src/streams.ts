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

/** Creates Tributary's streams if they are missing (idempotent; every service may call it). */
export async function ensureStreams(nc: NatsConnection): Promise<JetStreamManager> {
  const jsm = await jetstreamManager(nc);
  const existing = new Set<string>();
  for await (const name of jsm.streams.names()) existing.add(name);
  for (const cfg of STREAM_CONFIGS) {
    if (existing.has(cfg.name)) continue;
    try {
      await jsm.streams.add({ storage: StorageType.File, ...cfg });
    } catch (err) {
      // Another service may have created it between our listing and our add.
      if (!(err instanceof JetStreamApiError)) throw err;
      await jsm.streams.info(cfg.name);
    }
  }
  return jsm;
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

/** Opens (creating if missing) the KV buckets. */
export async function openBuckets(nc: NatsConnection): Promise<Buckets> {
  const kvm = new Kvm(nc);
  const [pservers, jobs, members] = await Promise.all([
    kvm.create(KV_BUCKETS.pservers, { history: 1 }),
    kvm.create(KV_BUCKETS.jobs, { history: 1 }),
    kvm.create(KV_BUCKETS.members, { history: 1, ttl: MEMBERS_BUCKET_TTL_MS }),
  ]);
  return { pservers, jobs, members };
}
