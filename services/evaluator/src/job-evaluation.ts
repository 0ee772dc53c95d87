/**
 * The evaluator's work on one run of one job, coordinated: the snapshot feed says which
 * parameters to score next (`snapshot-feed.ts`), the scorer runs them on the evaluation set
 * (`scoring.ts`), the stop policy judges each score (`stop-policy.ts`, through `best-so-far.ts`,
 * which also keeps the best parameters), and once the job has stopped the best model and the
 * summary are exported (`model-export.ts`, `job-summary.ts`). All along, the job's events go to
 * the history files of its output directory (`job-history.ts`).
 */
import { performance } from 'node:perf_hooks';
import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import type { JobSpec } from '#libs/job-spec';
import type { PlainTensor } from '#libs/learner';
import type { MasterClient } from '#libs/master-client';
import { SUBJECTS, encodeJson, type JobEventPublisher, type JobRecord } from '#libs/messaging';
import { BestSoFar, type Scored } from './best-so-far.js';
import {
  FAULT_REPORT_BUDGET_MS,
  FINAL_FETCH_EXPIRES_MS,
  SNAPSHOT_FETCH_EXPIRES_MS,
  SNAPSHOT_RETRY_DELAY_MS,
} from './defaults.js';
import { SnapshotParamsError, errorMessage, isSnapshotPassed } from './errors.js';
import type { EvaluatorMetrics } from './evaluator-metrics.js';
import type { LineLogger } from '#libs/logging';
import { sleep } from '#libs/retry';
import type { EvaluationSetCache } from './evaluation-set.js';
import { summarizeRun } from './job-summary.js';
import { JobHistory } from './job-history.js';
import { exportModel, writeSummary } from './model-export.js';
import { Scorer } from './scoring.js';
import { SnapshotFeed } from './snapshot-feed.js';
import type { SnapshotParamsSource } from './snapshot-params.js';
import type { StopDecision } from './stop-policy.js';

/** What the evaluator is doing for a job, for its member status. */
export type JobActivity = 'evaluating' | 'exporting' | 'done';

/** What a {@link JobEvaluation} works with. */
export interface JobEvaluationDeps {
  js: JetStreamClient;
  jsm: JetStreamManager;
  /** Where the run's events (metrics, export, failures) go to the events stream. */
  events: JobEventPublisher;
  params: SnapshotParamsSource;
  evaluationSets: EvaluationSetCache;
  /** Asks the master for the job's status (samples trained). */
  master: MasterClient;
  logger: LineLogger;
  /** How long the status request for the summary waits for the master. */
  statusTimeoutMs: number;
  /** Told when the job's work starts and ends. */
  onActivity?: (jobId: string, activity: JobActivity) => void;
  /** Where each evaluation is recorded for Prometheus. */
  metrics?: EvaluatorMetrics;
}

/**
 * One run of a job (a job id and its `startedAt`). `start` follows the snapshot notices
 * until `finish` (the job stopped: export) or `close` (the service stops: no export).
 */
export class JobEvaluation {
  readonly jobId: string;
  readonly startedAt: string;
  private record: JobRecord;
  private readonly feed: SnapshotFeed;
  private readonly scorer: Scorer;
  private readonly bestSoFar: BestSoFar;
  private readonly history: JobHistory;
  private stopSent = false;
  private stopping = false;
  private loop: Promise<void> | undefined;
  private finishing: Promise<boolean> | undefined;
  private lastReportedError: string | undefined;
  private closed = false;

  constructor(
    private readonly deps: JobEvaluationDeps,
    record: JobRecord,
    readonly spec: JobSpec,
  ) {
    this.jobId = record.jobId;
    this.startedAt = record.startedAt;
    this.record = record;
    this.scorer = new Scorer(spec, deps.evaluationSets);
    this.feed = new SnapshotFeed(
      { ...deps, manifest: () => this.scorer.manifest() },
      { jobId: this.jobId, startedAtMs: Date.parse(record.startedAt), spec },
    );
    this.bestSoFar = new BestSoFar({ jobId: this.jobId, startedAt: this.startedAt, spec }, deps.logger);
    this.history = new JobHistory(deps, {
      jobId: this.jobId,
      startedAt: this.startedAt,
      output: spec.output,
      metric: spec.evaluation.metric,
    });
  }

  /** True once the export was written (or the run was closed). */
  get done(): boolean {
    return this.closed;
  }

  /** Starts following the job's snapshot notices. */
  start(): void {
    this.history.start();
    this.loop ??= this.follow();
  }

  /**
   * Takes a newer record of the job: its epoch, for the metrics, and, once the master stopped
   * it (on its budget, or on anyone's request), the stop reason and time, for the summary.
   */
  update(record: JobRecord): void {
    this.record = record;
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
    await this.history.close();
    await this.bestSoFar.flushed();
    if (!this.closed) await this.release(false);
  }

  private async stopFollowing(): Promise<void> {
    this.stopping = true;
    this.feed.interrupt();
    await this.loop;
  }

  /** Resumes from the best checkpoint of the run, if an earlier evaluator left one. */
  private async restored(): Promise<void> {
    this.feed.noteVersion(await this.bestSoFar.restored());
  }

  private async follow(): Promise<void> {
    await this.restored();
    while (!this.stopping) {
      try {
        const version = await this.feed.newestSnapshot(SNAPSHOT_FETCH_EXPIRES_MS, { interrupted: () => this.stopping });
        if (version !== undefined) await this.scoreSnapshot(version);
        await this.scoreOnTime();
      } catch (err) {
        if (this.stopping) break;
        this.feed.forgetConsumer();
        this.deps.logger.warn(`job ${this.jobId}: reading snapshot notices failed (${errorMessage(err)}); retrying`);
        await sleep(SNAPSHOT_RETRY_DELAY_MS);
      }
    }
  }

  /**
   * Scores snapshot `version`; its notices are acknowledged whether that worked or not. When the
   * shards no longer keep it (they retain the last two, and a fast job can pass them before this
   * evaluator, which yields the cores to trainers, fetches one), the parameters they hold now are
   * scored instead: otherwise such a job would never be evaluated again.
   */
  private async scoreSnapshot(version: number): Promise<void> {
    try {
      await this.evaluate(version, await this.feed.loadSnapshot(version));
    } catch (err) {
      if (isSnapshotPassed(err)) await this.scoreInsteadOf(version);
      else this.reportFailure(err, version);
    } finally {
      this.feed.settle(version);
    }
  }

  /** Scores the parameters the shards hold now, in place of snapshot `passed`. */
  private async scoreInsteadOf(passed: number): Promise<void> {
    let current;
    try {
      current = await this.feed.loadCurrent();
    } catch (err) {
      this.reportFailure(err, passed);
      return;
    }
    this.deps.logger.log(
      `job ${this.jobId}: training passed snapshot ${passed} before it was fetched; scoring version ${current.version}`,
    );
    await this.evaluateOrReport(current.version, current.params);
  }

  /** `evaluation.everySeconds`: scores the current parameters when no snapshot came in time. */
  private async scoreOnTime(): Promise<void> {
    if (this.stopping) return;
    const current = await this.feed.currentIfDue();
    if (current === undefined) return;
    await this.evaluateOrReport(current.version, current.params);
  }

  /** `evaluate`, a failure reported rather than thrown. */
  private async evaluateOrReport(version: number, params: PlainTensor[]): Promise<void> {
    try {
      await this.evaluate(version, params);
    } catch (err) {
      this.reportFailure(err, version);
    }
  }

  /** Scores `params` on the evaluation set, publishes metrics, and applies the stop policy. */
  private async evaluate(version: number, params: PlainTensor[]): Promise<void> {
    this.deps.onActivity?.(this.jobId, 'evaluating');
    // Asked alongside the scoring, so the count matches the snapshot's time.
    const trained = this.deps.master
      .jobStatus(this.jobId, { timeoutMs: this.deps.statusTimeoutMs })
      .then((status) => (typeof status.samples === 'number' ? status.samples : undefined))
      .catch(() => undefined);
    try {
      const startedAt = performance.now();
      const { metrics, examples, value } = await this.scorer.score(params);
      const samples = await trained;
      const seconds = (performance.now() - startedAt) / 1_000;
      const epoch = this.record.epoch;
      const decision = this.bestSoFar.observe({ version, value, params });
      this.feed.scored(version);
      const best = this.bestSoFar.bestValue;
      const metric = this.spec.evaluation.metric;
      this.deps.metrics?.evaluated(this.jobId, { metric, value, loss: metrics.loss, best, version, seconds });
      this.deps.events.publish({
        type: 'metrics',
        jobId: this.jobId,
        version,
        epoch,
        metrics,
        examples,
        best,
        ...(samples === undefined ? {} : { samples }),
      });
      this.deps.logger.log(
        `job ${this.jobId}: version ${version} epoch ${epoch}: loss ${metrics.loss.toFixed(4)}` +
          (metrics.accuracy === undefined ? '' : ` accuracy ${metrics.accuracy.toFixed(4)}`) +
          ` on ${examples} examples (best ${this.spec.evaluation.metric} ${best})`,
      );
      this.lastReportedError = undefined;
      if (decision.stop) await this.sendStop(decision);
    } finally {
      this.deps.onActivity?.(this.jobId, 'done');
    }
  }

  /** Publishes the stop decision on the job's stop subject, once; the master carries it out. */
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
      this.deps.logger.warn(
        `job ${this.jobId}: publishing the stop decision failed (${errorMessage(err)}); will retry`,
      );
    }
  }

  /**
   * Logs a failed evaluation. Parameters that cannot be fetched are a warning (the next
   * snapshot may do); anything else (evaluation files, model) is an error and an
   * `evaluation-failed` event, published once per distinct error. While the job runs, such a
   * failure is also reported to the master as a fault: a job the evaluator cannot score fails
   * after a few.
   */
  private reportFailure(err: unknown, version?: number): void {
    const text = errorMessage(err);
    if (err instanceof SnapshotParamsError) {
      this.deps.logger.warn(`job ${this.jobId}: ${text}`);
      return;
    }
    this.deps.logger.error(
      `job ${this.jobId}: evaluation${version === undefined ? '' : ` of version ${version}`} failed: ${text}`,
    );
    if (!this.stopping && !this.closed) {
      this.deps.master
        .reportFault(this.jobId, this.startedAt, `evaluation failed: ${text}`, { budgetMs: FAULT_REPORT_BUDGET_MS })
        .catch((e: unknown) =>
          this.deps.logger.warn(`job ${this.jobId}: reporting the failure failed (${errorMessage(e)})`),
        );
    }
    if (text === this.lastReportedError) return;
    this.lastReportedError = text;
    this.deps.events.publish({
      type: 'evaluation-failed',
      jobId: this.jobId,
      error: text,
      ...(version === undefined ? {} : { version }),
    });
  }

  private async exportOnce(): Promise<boolean> {
    this.history.start();
    await this.stopFollowing();
    this.stopping = true;
    await this.restored();
    try {
      const version = await this.feed.newestSnapshot(FINAL_FETCH_EXPIRES_MS, { waitOut: true });
      if (version !== undefined) await this.scoreSnapshot(version);
    } catch (err) {
      this.deps.logger.warn(`job ${this.jobId}: reading the last snapshot notices failed (${errorMessage(err)})`);
    }
    this.deps.onActivity?.(this.jobId, 'exporting');
    try {
      const chosen = this.bestSoFar.best ?? (await this.scoreCurrent());
      if (chosen === undefined) return false;
      await exportModel(this.jobId, await this.scorer.modelWith(chosen.params), this.spec.output);
      const summary = await summarizeRun(
        {
          record: this.record,
          spec: this.spec,
          chosen,
          latestVersion: this.feed.latestVersion,
          decision: this.bestSoFar.decision,
        },
        this.deps,
      );
      await writeSummary(this.spec.output, summary);
      this.deps.events.publish({
        type: 'model-exported',
        jobId: this.jobId,
        output: this.spec.output,
        bestValue: summary.bestValue ?? Number.NaN,
      });
      this.deps.logger.log(
        `job ${this.jobId}: exported version ${chosen.version} (${summary.metric} ${summary.bestValue}) to ${this.spec.output}`,
      );
      await this.history.finish();
      await this.bestSoFar.discard();
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
      current = await this.feed.loadCurrent();
    } catch (err) {
      this.deps.logger.error(`job ${this.jobId}: nothing to export: ${errorMessage(err)}`);
      this.deps.events.publish({
        type: 'evaluation-failed',
        jobId: this.jobId,
        error: `nothing to export: ${errorMessage(err)}`,
      });
      return undefined;
    }
    await this.evaluateOrReport(current.version, current.params);
    return this.bestSoFar.best ?? { version: current.version, value: Number.NaN, params: current.params };
  }

  private async release(exported: boolean): Promise<void> {
    this.closed = true;
    this.scorer.release();
    this.bestSoFar.forget();
    await this.feed.release(exported);
  }
}
