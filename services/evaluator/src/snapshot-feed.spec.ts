import { jetstream, jetstreamManager, type JetStreamClient } from '@nats-io/jetstream';
import { validateJobSpec } from '#libs/job-spec';
import { SUBJECTS, connectNats, encodeJson, ensureStreams, type NatsConnection } from '#libs/messaging';
import type { LineLogger } from '#libs/logging';
import { startTestServers, type TestServers } from '../../../test/support/servers.js';
import { SnapshotFeed } from './snapshot-feed.js';
import type { SnapshotParamsSource } from './snapshot-params.js';

/** Far longer than any test may take: a pull that waited this out would fail the test. */
const NEVER_MS = 10 * 60_000;

const quietLogger: LineLogger = { log: () => undefined, warn: () => undefined, error: () => undefined };

/** Parameters are never loaded here: these tests only read notices. */
const noParams: SnapshotParamsSource = {
  loadSnapshot: () => Promise.reject(new Error('not loaded in these tests')),
  loadCurrent: () => Promise.reject(new Error('not loaded in these tests')),
  release: () => Promise.resolve(),
  close: () => Promise.resolve(),
};

/** `promise`, or a failure naming `what` if it is not settled within `ms`. */
async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not answered within ${ms / 1000} s`)), ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

describe('snapshot feed', () => {
  let servers: TestServers;
  let nc: NatsConnection;
  let js: JetStreamClient;

  beforeAll(async () => {
    servers = await startTestServers();
    nc = await connectNats(servers.nats.url, 'snapshot feed test');
    await ensureStreams(nc);
    js = jetstream(nc);
  });

  afterAll(async () => {
    await nc?.drain();
    await servers?.stop();
  });

  const feedFor = async (jobId: string): Promise<SnapshotFeed> => {
    const spec = validateJobSpec({
      id: jobId,
      dataset: {
        train: ['/data/train.rio'],
        eval: ['/data/eval.rio'],
        layout: { featureShape: [3], featureDtype: 'float32', labelDtype: 'int32', numClasses: 3 },
      },
      model: { preset: 'mlp', hiddenUnits: [3] },
      optimizer: { type: 'sgd', learningRate: 0.1 },
      training: { batchSize: 8 },
      pservers: { count: 2 },
      evaluation: { everySteps: 10, metric: 'accuracy' },
      stop: { maxEpochs: 1 },
      output: `/out/${jobId}`,
    });
    return new SnapshotFeed(
      { js, jsm: await jetstreamManager(nc), params: noParams, logger: quietLogger, manifest: async () => [] },
      { jobId, startedAtMs: Date.now(), spec },
    );
  };
  const notice = (jobId: string, shard: number, version: number) =>
    js.publish(SUBJECTS.snapshots(jobId), encodeJson({ jobId, shard, version, at: new Date().toISOString() }));

  it('snapshot feed - answers as soon as a version is complete, without waiting out the pull', async () => {
    const jobId = 'feed-prompt';
    const feed = await feedFor(jobId);
    await notice(jobId, 0, 10);
    await notice(jobId, 1, 10);
    await expect(within(feed.newestSnapshot(NEVER_MS), 20_000, 'newest snapshot')).resolves.toBe(10);
    feed.settle(10);

    // Nothing waiting: the pull waits for the next notice, and answers once it came.
    const next = feed.newestSnapshot(NEVER_MS);
    await notice(jobId, 0, 20);
    await expect(within(next, 20_000, 'a notice that came during the pull')).resolves.toBeUndefined();
    await notice(jobId, 1, 20);
    await expect(within(feed.newestSnapshot(NEVER_MS), 20_000, 'version 20')).resolves.toBe(20);
  });

  it('snapshot feed - reads a backlog whole and offers its newest complete version', async () => {
    const jobId = 'feed-backlog';
    const feed = await feedFor(jobId);
    for (let version = 1; version <= 40; version++) {
      await notice(jobId, 0, version);
      await notice(jobId, 1, version);
    }
    await notice(jobId, 0, 41);
    await expect(within(feed.newestSnapshot(NEVER_MS), 20_000, 'the backlog')).resolves.toBe(40);
    expect(feed.latestVersion).toBe(41);
  });

  it('snapshot feed - the last pull waits for notices still in flight', async () => {
    const jobId = 'feed-final';
    const feed = await feedFor(jobId);
    await notice(jobId, 0, 7);
    const late = new Promise<void>((resolve) => setTimeout(() => void notice(jobId, 1, 7).then(() => resolve()), 300));
    // The whole wait is waited out; its length is the room a late timer or publish has.
    await expect(feed.newestSnapshot(3_000, { waitOut: true })).resolves.toBe(7);
    await late;
  });
});
