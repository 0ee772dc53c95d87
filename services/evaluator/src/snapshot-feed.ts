/**
 * Which parameters of a job the evaluator scores next: the newest snapshot that every pserver
 * shard has announced on the job's snapshot notices (a backlog is read whole and only its newest
 * complete version is offered), and, with `evaluation.everySeconds`, the parameters the shards
 * hold now when no snapshot came in time.
 */
import {
  AckPolicy,
  DeliverPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  type Consumer,
  type ConsumerMessages,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
} from '@nats-io/jetstream';
import type { JobSpec } from '#libs/job-spec';
import type { PlainTensor } from '#libs/learner';
import { CONSUMERS, STREAMS, SUBJECTS } from '#libs/messaging';
import {
  SNAPSHOT_ACK_WAIT_MS,
  SNAPSHOT_CONSUMER_INACTIVE_MS,
  SNAPSHOT_FETCH_MAX_MESSAGES,
  SNAPSHOT_START_MARGIN_MS,
} from './defaults.js';
import { errorMessage } from './errors.js';
import type { LineLogger } from '#libs/logging';
import type { ParamManifestEntry, SnapshotParamsSource, VersionedParams } from './snapshot-params.js';
import { SnapshotTracker, parseSnapshotNotice } from './snapshot-tracker.js';

/** What a {@link SnapshotFeed} reads from and loads with. */
export interface SnapshotFeedDeps {
  js: JetStreamClient;
  jsm: JetStreamManager;
  params: SnapshotParamsSource;
  logger: LineLogger;
  /** The model's parameters (names and shapes, in order), as the shards are asked for them. */
  manifest: () => Promise<ParamManifestEntry[]>;
}

/** The run a {@link SnapshotFeed} reads for. */
export interface SnapshotFeedRun {
  jobId: string;
  /** The run's `startedAt` in epoch ms (NaN when the record's is not a date). */
  startedAtMs: number;
  spec: JobSpec;
}

/**
 * The snapshot notices of one run, through the job's durable consumer, and the everySeconds
 * fallback. A notice is acknowledged only once its version is settled (scored or skipped), so
 * a version an evaluator died on is offered again to the next one.
 */
export class SnapshotFeed {
  private readonly tracker: SnapshotTracker<JsMsg>;
  private consumer: Consumer | undefined;
  private fetching: ConsumerMessages | undefined;
  private highestVersion = -1;
  /** When the last evaluation finished (or the run began), for `evaluation.everySeconds`. */
  private lastScoredAtMs = Date.now();
  /** The newest version scored so far. */
  private lastScoredVersion = -1;

  constructor(
    private readonly deps: SnapshotFeedDeps,
    private readonly run: SnapshotFeedRun,
  ) {
    this.tracker = new SnapshotTracker(run.spec.pservers.count);
  }

  /** The highest model version heard of (announced, scored or restored); the run's step count. */
  get latestVersion(): number {
    return this.highestVersion;
  }

  /** Counts `version` as heard of, e.g. the version of a restored best checkpoint. */
  noteVersion(version: number): void {
    this.highestVersion = Math.max(this.highestVersion, version);
  }

  /** Records that `version` was scored, which restarts the everySeconds clock. */
  scored(version: number): void {
    this.lastScoredAtMs = Date.now();
    this.lastScoredVersion = Math.max(this.lastScoredVersion, version);
    this.noteVersion(version);
  }

  /**
   * Pulls notices until none is waiting and returns the newest complete version not yet
   * settled. The first pull waits up to `expiresMs` for one notice and returns as soon as it
   * came; the notices behind it are then pulled by their count, so no pull waits out its expiry
   * while notices are there (a pull for more notices than are waiting would, which held each
   * evaluation of a fast job back by a second). `waitOut`: the first pull instead waits the
   * whole `expiresMs` for notices still in flight, as the last pull before an export does.
   * Returns undefined as soon as `interrupted()` says so between pulls; a pull under way is cut
   * short by {@link interrupt}.
   */
  async newestSnapshot(
    expiresMs: number,
    { interrupted = () => false, waitOut = false }: { interrupted?: () => boolean; waitOut?: boolean } = {},
  ): Promise<number | undefined> {
    const consumer = await this.ensureConsumer();
    let wanted = waitOut ? SNAPSHOT_FETCH_MAX_MESSAGES : 1;
    for (;;) {
      if (interrupted()) return undefined;
      const last = await this.pull(consumer, wanted, expiresMs);
      if (last === undefined || last.info.pending === 0) break;
      wanted = Math.min(last.info.pending, SNAPSHOT_FETCH_MAX_MESSAGES);
    }
    const version = this.tracker.newestComplete();
    if (version === undefined) return undefined;
    const skipped = this.tracker.pendingVersions().filter((v) => v < version);
    if (skipped.length > 0) {
      this.deps.logger.log(
        `job ${this.run.jobId}: skipping older snapshots ${skipped.join(', ')} for version ${version}`,
      );
    }
    return version;
  }

  /** One pull of up to `max` notices, each taken in; the last one, or undefined if none came. */
  private async pull(consumer: Consumer, max: number, expiresMs: number): Promise<JsMsg | undefined> {
    const batch = await consumer.fetch({ max_messages: max, expires: expiresMs });
    this.fetching = batch;
    let last: JsMsg | undefined;
    try {
      for await (const msg of batch) {
        last = msg;
        this.take(msg);
      }
    } finally {
      this.fetching = undefined;
    }
    return last;
  }

  /** Cuts a pull under way short. */
  interrupt(): void {
    this.fetching?.stop();
  }

  /** Forgets the consumer, so it is looked up (or created) again: it may have been lost with the server's state. */
  forgetConsumer(): void {
    this.consumer = undefined;
  }

  /**
   * The parameters of snapshot `version` from every shard.
   * @throws SnapshotParamsError when they cannot be had.
   */
  async loadSnapshot(version: number): Promise<PlainTensor[]> {
    return this.deps.params.loadSnapshot(this.run.spec, version, await this.deps.manifest());
  }

  /**
   * Settles every version up to `version` (scored, or given up on) and acknowledges their
   * notices.
   */
  settle(version: number): void {
    for (const msg of this.tracker.take(version)) msg.ack();
  }

  /**
   * The parameters the shards hold now, pulled at one version across all shards.
   * @throws SnapshotParamsError (or a model error) when they cannot be had.
   */
  async loadCurrent(): Promise<VersionedParams> {
    return this.deps.params.loadCurrent(this.run.spec, await this.deps.manifest());
  }

  /**
   * `evaluation.everySeconds`: once that long has passed since the last evaluation, the
   * parameters the pservers hold now, when they are newer than the last scored (a snapshot by
   * steps may be far off when steps are slow). Nothing to pull yet is logged, not an error.
   */
  async currentIfDue(): Promise<VersionedParams | undefined> {
    const everySeconds = this.run.spec.evaluation.everySeconds;
    if (everySeconds === undefined) return undefined;
    if (Date.now() - this.lastScoredAtMs < everySeconds * 1000) return undefined;
    this.lastScoredAtMs = Date.now();
    let current;
    try {
      current = await this.loadCurrent();
    } catch (err) {
      this.deps.logger.log(`job ${this.run.jobId}: no parameters to evaluate on time yet (${errorMessage(err)})`);
      return undefined;
    }
    return current.version <= this.lastScoredVersion ? undefined : current;
  }

  /**
   * Releases what the parameter source holds for the job; `exported` also deletes the durable
   * consumer, which is otherwise kept for the next evaluator of the run.
   */
  async release(exported: boolean): Promise<void> {
    await this.deps.params.release(this.run.jobId).catch(() => undefined);
    if (exported) {
      await this.deps.jsm.consumers
        .delete(STREAMS.snapshots.name, CONSUMERS.evaluator(this.run.jobId))
        .catch(() => undefined);
    }
  }

  private take(msg: JsMsg): void {
    let notice;
    try {
      notice = parseSnapshotNotice(msg.subject, msg.data, this.run.jobId, this.run.spec.pservers.count);
    } catch (err) {
      this.deps.logger.warn(`job ${this.run.jobId}: skipping snapshot notice: ${errorMessage(err)}`);
      msg.term();
      return;
    }
    this.noteVersion(notice.version);
    if (this.tracker.add(notice.shard, notice.version, msg) === 'stale') msg.ack();
  }

  /** The job's durable consumer of snapshot notices, created if missing. */
  private async ensureConsumer(): Promise<Consumer> {
    if (this.consumer !== undefined) return this.consumer;
    const stream = STREAMS.snapshots.name;
    const name = CONSUMERS.evaluator(this.run.jobId);
    const exists = await this.deps.jsm.consumers.info(stream, name).then(
      () => true,
      (err: unknown) => {
        if (err instanceof JetStreamApiError && err.code === JetStreamApiCodes.ConsumerNotFound) return false;
        throw err;
      },
    );
    if (!exists) {
      const from = Number.isFinite(this.run.startedAtMs)
        ? {
            deliver_policy: DeliverPolicy.StartTime,
            opt_start_time: new Date(this.run.startedAtMs - SNAPSHOT_START_MARGIN_MS).toISOString(),
          }
        : { deliver_policy: DeliverPolicy.All };
      await this.deps.jsm.consumers.add(stream, {
        durable_name: name,
        filter_subject: SUBJECTS.snapshots(this.run.jobId),
        ack_policy: AckPolicy.Explicit,
        ack_wait: SNAPSHOT_ACK_WAIT_MS * 1e6,
        inactive_threshold: SNAPSHOT_CONSUMER_INACTIVE_MS * 1e6,
        ...from,
      });
    }
    this.consumer = await this.deps.js.consumers.get(stream, name);
    return this.consumer;
  }
}
