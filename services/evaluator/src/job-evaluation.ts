/**
 * The evaluator's work on one run of one job: follow its snapshot notices, score the newest
 * complete snapshot on the evaluation set, publish metrics, apply the stop policy, keep the best
 * parameters, and export the model once the job has stopped.
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
import { TfjsLearner, namedTrainableVariables, type PlainTensor } from '#libs/learner';
import type { LineLogger } from '#libs/logging';
import { MasterClient } from '#libs/master-client';
import {
  CONSUMERS,
  STREAMS,
  SUBJECTS,
  encodeJson,
  publishEvent,
  type EvaluationMetrics,
  type JobRecord,
  type JobSummary,
  type NatsConnection,
  type StopReason,
} from '#libs/messaging';
import { sleep } from '#libs/retry';
import {
  FINAL_FETCH_EXPIRES_MS,
  SNAPSHOT_ACK_WAIT_MS,
  SNAPSHOT_CONSUMER_INACTIVE_MS,
  SNAPSHOT_FETCH_EXPIRES_MS,
  SNAPSHOT_FETCH_MAX_MESSAGES,
  SNAPSHOT_RETRY_DELAY_MS,
  SNAPSHOT_START_MARGIN_MS,
} from './defaults.js';
import {
  BestCheckpointError,
  loadBestCheckpoint,
  removeBestCheckpoint,
  saveBestCheckpoint,
} from './best-checkpoint.js';
import { SnapshotParamsError } from './errors.js';
import type { EvaluationSetCache } from './evaluation-set.js';
import { exportModel, writeSummary } from './model-export.js';
import type { ParamManifestEntry, SnapshotParamsSource } from './snapshot-params.js';
import { SnapshotTracker, parseSnapshotNotice } from './snapshot-tracker.js';
import { StopPolicy, type StopDecision } from './stop-policy.js';

/** What the evaluator is doing for a job, for its member status. */
export type JobActivity = 'evaluating' | 'exporting' | 'done';

/** What a {@link JobEvaluation} works with. */
export interface JobEvaluationDeps {
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
  params: SnapshotParamsSource;
  evaluationSets: EvaluationSetCache;
  /** Asks the master for the job's status (samples trained). */
  master: MasterClient;
  logger: LineLogger;
  /** How long the status request for the summary waits for the master. */
  statusTimeoutMs: number;
  /** Told when the job's work starts and ends. */
  onActivity?: (jobId: string, activity: JobActivity) => void;
}

/** An evaluated parameter set. */
interface Scored {
  version: number;
  value: number;
  params: PlainTensor[];
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * One run of a job (a job id and its `startedAt`). `start` follows the snapshot notices
 * until `finish` (the job stopped: export) or `close` (the service stops: no export).
 */
export class JobEvaluation {
  readonly jobId: string;
  readonly startedAt: string;
  private record: JobRecord;
  private readonly policy: StopPolicy;
  private readonly tracker: SnapshotTracker<JsMsg>;
  private readonly startedAtMs: number;
  private learner: TfjsLearner | undefined;
  private best: Scored | undefined;
  private lastVersion = -1;
  /** When the last evaluation finished (or the run began), for `evaluation.everySeconds`. */
  private lastEvaluationAtMs = Date.now();
  /** The newest version scored so far. */
  private lastEvaluatedVersion = -1;
  private stopSent = false;
  private stopping = false;
  private loop: Promise<void> | undefined;
  private fetching: ConsumerMessages | undefined;
  private consumer: Consumer | undefined;
  private finishing: Promise<boolean> | undefined;
  private lastReportedError: string | undefined;
  private closed = false;
  private restoring: Promise<void> | undefined;
  private saving: Promise<void> = Promise.resolve();

  constructor(
    private readonly deps: JobEvaluationDeps,
    record: JobRecord,
    readonly spec: JobSpec,
  ) {
    this.jobId = record.jobId;
    this.startedAt = record.startedAt;
    this.startedAtMs = Date.parse(record.startedAt);
    this.record = record;
    this.policy = new StopPolicy(spec.stop, spec.evaluation.metric);
    this.tracker = new SnapshotTracker(spec.pservers.count);
  }

  /** True once the export was written (or the run was closed). */
  get done(): boolean {
    return this.closed;
  }

  /** Starts following the job's snapshot notices. */
  start(): void {
    this.loop ??= this.follow();
  }

  /** Takes a newer record of the job (epoch, state), and checks the budgets against it. */
  update(record: JobRecord): void {
    this.record = record;
    this.checkBudget();
  }

  /** Checks the epoch and time budgets and sends the stop decision if one is due. */
  checkBudget(nowMs: number = Date.now()): void {
    if (this.stopping || this.record.state === 'stopped') return;
    const decision = this.policy.checkBudget({ epoch: this.record.epoch, elapsedSeconds: this.elapsedSeconds(nowMs) });
    if (decision.stop) void this.sendStop(decision);
  }

  /**
   * The job stopped: reads the notices still waiting, then writes the best model and the
   * summary to the job's output and publishes `model-exported`. Resolves to whether the export
   * was written; calling it again returns the same outcome.
   */
  finish(): Promise<boolean> {
    this.finishing ??= this.exportOnce();
    return this.finishing;
  }

  /**
   * Stops following notices and releases the job's resources without exporting; an export
   * already under way is waited for.
   */
  async close(): Promise<void> {
    if (this.finishing !== undefined) await this.finishing;
    await this.stopFollowing();
    await this.saving;
    if (!this.closed) await this.release(false);
  }

  private elapsedSeconds(nowMs: number): number {
    return (nowMs - this.startedAtMs) / 1000;
  }

  private async stopFollowing(): Promise<void> {
    this.stopping = true;
    this.fetching?.stop();
    await this.loop;
  }

  private async follow(): Promise<void> {
    await this.restored();
    while (!this.stopping) {
      try {
        const consumer = await this.ensureConsumer();
        await this.pullAndEvaluate(consumer, SNAPSHOT_FETCH_EXPIRES_MS, true);
        await this.evaluateOnTime();
      } catch (err) {
        if (this.stopping) break;
        // Look the consumer up again next time: it may have been lost with the server's state.
        this.consumer = undefined;
        this.deps.logger.warn(`job ${this.jobId}: reading snapshot notices failed (${message(err)}); retrying`);
        await sleep(SNAPSHOT_RETRY_DELAY_MS);
      }
    }
  }

  /**
   * Takes back what an earlier evaluator process of this run kept in the job's output (best
   * parameters, stop policy counters), once; a checkpoint that cannot be read is logged and
   * the run starts afresh.
   */
  private restored(): Promise<void> {
    this.restoring ??= (async () => {
      try {
        const checkpoint = await loadBestCheckpoint(this.spec.output, this.jobId, this.startedAt);
        if (checkpoint === undefined) return;
        this.policy.restore(checkpoint.policy);
        const best = checkpoint.policy.best;
        if (checkpoint.params !== undefined && best !== undefined && checkpoint.version === best.version) {
          this.best = { version: best.version, value: best.value, params: checkpoint.params };
        }
        this.lastVersion = Math.max(this.lastVersion, checkpoint.version);
        this.deps.logger.log(
          `job ${this.jobId}: resumed from the best checkpoint: ${checkpoint.policy.evaluations} evaluations, ` +
            (best === undefined
              ? 'no best yet'
              : `best ${this.spec.evaluation.metric} ${best.value} at version ${best.version}`),
        );
      } catch (err) {
        if (!(err instanceof BestCheckpointError)) throw err;
        this.deps.logger.warn(`job ${this.jobId}: ${err.message}; starting the evaluation afresh`);
      }
    })();
    return this.restoring;
  }

  /** Records the policy counters, and new best parameters, in the job's output (one write at a time). */
  private saveCheckpoint(improved: Scored | undefined): void {
    const checkpoint = {
      jobId: this.jobId,
      startedAt: this.startedAt,
      metric: this.spec.evaluation.metric,
      policy: this.policy.state(),
      version: improved?.version ?? this.best?.version ?? -1,
      ...(improved === undefined ? {} : { params: improved.params }),
    };
    this.saving = this.saving
      .then(() => saveBestCheckpoint(this.spec.output, checkpoint))
      .catch((err: unknown) => {
        this.deps.logger.warn(`job ${this.jobId}: saving the best checkpoint failed (${message(err)})`);
      });
  }

  /** The job's durable consumer of snapshot notices, created if missing. */
  private async ensureConsumer(): Promise<Consumer> {
    if (this.consumer !== undefined) return this.consumer;
    const stream = STREAMS.snapshots.name;
    const name = CONSUMERS.evaluator(this.jobId);
    const exists = await this.deps.jsm.consumers.info(stream, name).then(
      () => true,
      (err: unknown) => {
        if (err instanceof JetStreamApiError && err.code === JetStreamApiCodes.ConsumerNotFound) return false;
        throw err;
      },
    );
    if (!exists) {
      const from = Number.isFinite(this.startedAtMs)
        ? {
            deliver_policy: DeliverPolicy.StartTime,
            opt_start_time: new Date(this.startedAtMs - SNAPSHOT_START_MARGIN_MS).toISOString(),
          }
        : { deliver_policy: DeliverPolicy.All };
      await this.deps.jsm.consumers.add(stream, {
        durable_name: name,
        filter_subject: SUBJECTS.snapshots(this.jobId),
        ack_policy: AckPolicy.Explicit,
        ack_wait: SNAPSHOT_ACK_WAIT_MS * 1e6,
        inactive_threshold: SNAPSHOT_CONSUMER_INACTIVE_MS * 1e6,
        ...from,
      });
    }
    this.consumer = await this.deps.js.consumers.get(stream, name);
    return this.consumer;
  }

  /**
   * Pulls notices until none is waiting (so a backlog is read whole and only its newest
   * complete version is evaluated), then evaluates that version.
   */
  private async pullAndEvaluate(consumer: Consumer, expiresMs: number, untilStopped: boolean): Promise<void> {
    for (;;) {
      if (untilStopped && this.stopping) return;
      const batch = await consumer.fetch({ max_messages: SNAPSHOT_FETCH_MAX_MESSAGES, expires: expiresMs });
      this.fetching = batch;
      let last: JsMsg | undefined;
      for await (const msg of batch) {
        last = msg;
        this.take(msg);
      }
      this.fetching = undefined;
      if (last === undefined || last.info.pending === 0) break;
    }
    await this.evaluateNewest();
  }

  private take(msg: JsMsg): void {
    let notice;
    try {
      notice = parseSnapshotNotice(msg.subject, msg.data, this.jobId, this.spec.pservers.count);
    } catch (err) {
      this.deps.logger.warn(`job ${this.jobId}: skipping snapshot notice: ${message(err)}`);
      msg.term();
      return;
    }
    this.lastVersion = Math.max(this.lastVersion, notice.version);
    if (this.tracker.add(notice.shard, notice.version, msg) === 'stale') msg.ack();
  }

  /**
   * `evaluation.everySeconds`: once that long has passed since the last evaluation, scores the
   * parameters the pservers hold now, pulled at one version across all shards (a snapshot by
   * steps may be far off when steps are slow). Nothing to pull yet is not an error.
   */
  private async evaluateOnTime(): Promise<void> {
    const everySeconds = this.spec.evaluation.everySeconds;
    if (everySeconds === undefined || this.stopping) return;
    if (Date.now() - this.lastEvaluationAtMs < everySeconds * 1000) return;
    this.lastEvaluationAtMs = Date.now();
    let current;
    try {
      current = await this.deps.params.loadCurrent(this.spec, await this.manifest());
    } catch (err) {
      this.deps.logger.log(`job ${this.jobId}: no parameters to evaluate on time yet (${message(err)})`);
      return;
    }
    if (current.version <= this.lastEvaluatedVersion) return;
    try {
      await this.evaluate(current.version, current.params);
    } catch (err) {
      this.reportFailure(err, current.version);
    }
  }

  private async evaluateNewest(): Promise<void> {
    const version = this.tracker.newestComplete();
    if (version === undefined) return;
    const skipped = this.tracker.pendingVersions().filter((v) => v < version);
    if (skipped.length > 0) {
      this.deps.logger.log(`job ${this.jobId}: skipping older snapshots ${skipped.join(', ')} for version ${version}`);
    }
    try {
      const params = await this.deps.params.loadSnapshot(this.spec, version, await this.manifest());
      await this.evaluate(version, params);
    } catch (err) {
      this.reportFailure(err, version);
    } finally {
      for (const msg of this.tracker.take(version)) msg.ack();
    }
  }

  /** Scores `params` on the evaluation set, publishes metrics, and applies the stop policy. */
  private async evaluate(version: number, params: PlainTensor[]): Promise<void> {
    this.deps.onActivity?.(this.jobId, 'evaluating');
    try {
      const set = await this.deps.evaluationSets.get(this.spec);
      const learner = await this.ensureLearner();
      learner.setParams(params);
      let lossSum = 0;
      let correct = 0;
      let examples = 0;
      for (const batch of set.batches) {
        const result = await learner.evaluate(batch);
        lossSum += result.lossSum;
        correct += result.correct;
        examples += result.samples;
      }
      const classification = this.spec.dataset.layout.numClasses !== undefined;
      const metrics: EvaluationMetrics = { loss: lossSum / examples };
      if (classification) metrics.accuracy = correct / examples;
      const metric = this.spec.evaluation.metric;
      const value = metric === 'accuracy' ? (metrics.accuracy ?? Number.NaN) : metrics.loss;
      const epoch = this.record.epoch;
      const decision = this.policy.observe({ version, value, epoch, elapsedSeconds: this.elapsedSeconds(Date.now()) });
      if (decision.improved) this.best = { version, value, params };
      this.lastEvaluationAtMs = Date.now();
      this.lastEvaluatedVersion = Math.max(this.lastEvaluatedVersion, version);
      this.saveCheckpoint(decision.improved ? this.best : undefined);
      this.lastVersion = Math.max(this.lastVersion, version);
      const best = this.policy.best?.value ?? Number.NaN;
      publishEvent(this.deps.nc, { type: 'metrics', jobId: this.jobId, version, epoch, metrics, examples, best });
      this.deps.logger.log(
        `job ${this.jobId}: version ${version} epoch ${epoch}: loss ${metrics.loss.toFixed(4)}` +
          (metrics.accuracy === undefined ? '' : ` accuracy ${metrics.accuracy.toFixed(4)}`) +
          ` on ${examples} examples (best ${metric} ${best})`,
      );
      this.lastReportedError = undefined;
      if (decision.stop) await this.sendStop(decision);
    } finally {
      this.deps.onActivity?.(this.jobId, 'done');
    }
  }

  private async ensureLearner(): Promise<TfjsLearner> {
    if (this.learner === undefined) {
      const learner = new TfjsLearner();
      await learner.initialize({
        model: this.spec.model,
        layout: this.spec.dataset.layout,
        seed: this.spec.training.seed,
      });
      this.learner = learner;
    }
    return this.learner;
  }

  /** The model's parameters (names and shapes, in order), as the shards are asked for them. */
  private async manifest(): Promise<ParamManifestEntry[]> {
    const learner = await this.ensureLearner();
    return namedTrainableVariables(learner.model).map(({ name, variable }) => ({ name, shape: [...variable.shape] }));
  }

  /** Publishes the stop decision on the job's stop subject, once. */
  private async sendStop(decision: StopDecision): Promise<void> {
    if (!decision.stop || this.stopSent || this.record.state === 'stopped') return;
    this.stopSent = true;
    try {
      await this.deps.js.publish(
        SUBJECTS.stop(this.jobId),
        encodeJson({ reason: decision.reason, detail: decision.detail }),
      );
      this.deps.logger.log(`job ${this.jobId}: stop requested (${decision.reason}: ${decision.detail})`);
    } catch (err) {
      this.stopSent = false;
      this.deps.logger.warn(`job ${this.jobId}: publishing the stop decision failed (${message(err)}); will retry`);
    }
  }

  /**
   * Logs a failed evaluation. Parameters that cannot be fetched are a warning (the next
   * snapshot may do); anything else (evaluation files, model) is an error and an
   * `evaluation-failed` event, published once per distinct error.
   */
  private reportFailure(err: unknown, version?: number): void {
    const text = message(err);
    if (err instanceof SnapshotParamsError) {
      this.deps.logger.warn(`job ${this.jobId}: ${text}`);
      return;
    }
    this.deps.logger.error(
      `job ${this.jobId}: evaluation${version === undefined ? '' : ` of version ${version}`} failed: ${text}`,
    );
    if (text === this.lastReportedError) return;
    this.lastReportedError = text;
    publishEvent(this.deps.nc, {
      type: 'evaluation-failed',
      jobId: this.jobId,
      error: text,
      ...(version === undefined ? {} : { version }),
    });
  }

  private async exportOnce(): Promise<boolean> {
    await this.stopFollowing();
    this.stopping = true;
    await this.restored();
    try {
      const consumer = await this.ensureConsumer();
      await this.pullAndEvaluate(consumer, FINAL_FETCH_EXPIRES_MS, false);
    } catch (err) {
      this.deps.logger.warn(`job ${this.jobId}: reading the last snapshot notices failed (${message(err)})`);
    }
    this.deps.onActivity?.(this.jobId, 'exporting');
    try {
      const chosen = this.best ?? (await this.scoreCurrent());
      if (chosen === undefined) return false;
      const learner = await this.ensureLearner();
      learner.setParams(chosen.params);
      await exportModel(this.jobId, learner.model, this.spec.output);
      const summary = await this.summary(chosen);
      await writeSummary(this.spec.output, summary);
      publishEvent(this.deps.nc, {
        type: 'model-exported',
        jobId: this.jobId,
        output: this.spec.output,
        bestValue: summary.bestValue ?? Number.NaN,
      });
      this.deps.logger.log(
        `job ${this.jobId}: exported version ${chosen.version} (${summary.metric} ${summary.bestValue}) to ${this.spec.output}`,
      );
      await this.saving;
      await removeBestCheckpoint(this.spec.output).catch((err: unknown) => {
        this.deps.logger.warn(`job ${this.jobId}: removing the best checkpoint failed (${message(err)})`);
      });
      await this.release(true);
      return true;
    } catch (err) {
      this.reportFailure(err);
      this.finishing = undefined;
      return false;
    } finally {
      this.deps.onActivity?.(this.jobId, 'done');
    }
  }

  /**
   * No snapshot was evaluated: fetches the current parameters and evaluates them; exports them
   * unscored when the evaluation set is unusable.
   */
  private async scoreCurrent(): Promise<Scored | undefined> {
    let current;
    try {
      current = await this.deps.params.loadCurrent(this.spec, await this.manifest());
    } catch (err) {
      this.deps.logger.error(`job ${this.jobId}: nothing to export: ${message(err)}`);
      publishEvent(this.deps.nc, {
        type: 'evaluation-failed',
        jobId: this.jobId,
        error: `nothing to export: ${message(err)}`,
      });
      return undefined;
    }
    try {
      await this.evaluate(current.version, current.params);
    } catch (err) {
      this.reportFailure(err, current.version);
    }
    return this.best ?? { version: current.version, value: Number.NaN, params: current.params };
  }

  private async summary(chosen: Scored): Promise<JobSummary> {
    const record = this.record;
    const endMs = record.stoppedAt !== undefined ? Date.parse(record.stoppedAt) : Date.now();
    const wallSeconds = Math.max(0, (endMs - this.startedAtMs) / 1000) || 0;
    const steps = Math.max(this.lastVersion, chosen.version, 0);
    let samples: number;
    try {
      samples = (await this.deps.master.jobStatus(this.jobId, { timeoutMs: this.deps.statusTimeoutMs })).samples;
      if (typeof samples !== 'number' || !Number.isFinite(samples)) throw new Error('status reply has no samples');
    } catch (err) {
      samples = steps * this.spec.training.batchSize;
      this.deps.logger.warn(
        `job ${this.jobId}: samples from the master unavailable (${message(err)}); estimating ${samples}`,
      );
    }
    const decided = this.policy.decision;
    const stopReason: StopReason = record.reason ?? (decided.stop ? decided.reason : 'manual');
    return {
      jobId: this.jobId,
      startedAt: this.startedAt,
      stopReason,
      metric: this.spec.evaluation.metric,
      bestValue: Number.isFinite(chosen.value) ? chosen.value : null,
      bestVersion: chosen.version,
      epochs: record.epoch,
      steps,
      wallSeconds,
      samples,
      samplesPerSecond: wallSeconds > 0 ? samples / wallSeconds : 0,
    };
  }

  private async release(exported: boolean): Promise<void> {
    this.closed = true;
    this.learner?.shutdown();
    this.learner = undefined;
    this.best = undefined;
    this.deps.evaluationSets.drop(this.jobId);
    await this.deps.params.release(this.jobId).catch(() => undefined);
    if (exported) {
      await this.deps.jsm.consumers
        .delete(STREAMS.snapshots.name, CONSUMERS.evaluator(this.jobId))
        .catch(() => undefined);
    }
  }
}
