/**
 * The evaluator: watches the jobs bucket and runs a {@link JobEvaluation} for each running job
 * (several at a time), exports each one when it stops (whoever stopped it: the master on its
 * epoch or time budget, this evaluator on target or patience, or a user), and keeps its member
 * status fresh.
 */
import { hostname } from 'node:os';
import { confineOutputPath } from '#libs/config';
import { jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import type { KvWatchEntry } from '@nats-io/kv';
import { prepareJobSpecValidation, validateJobSpec, type JobSpec } from '#libs/job-spec';
import { MasterClient, parseJobRecord } from '#libs/master-client';
import { JobEventPublisher, watchBucket, type Buckets, type JobRecord, type NatsConnection } from '#libs/messaging';
import { MemberBeacon } from '#libs/service-runtime';
import { EXPORT_AFTER_RESTART_MAX_AGE_MS, STATUS_TIMEOUT_MS } from './defaults.js';
import type { LineLogger } from '#libs/logging';
import { EvaluationSetCache } from './evaluation-set.js';
import type { EvaluatorMetrics } from './evaluator-metrics.js';
import { JobEvaluation, type JobActivity } from './job-evaluation.js';
import { JobHistory } from './job-history.js';
import { readExportedSummary } from './model-export.js';
import type { SnapshotParamsSource } from './snapshot-params.js';

/** Settings of an {@link Evaluator}. */
export interface EvaluatorOptions {
  /** This process's id, for its member entry. */
  id: string;
  /** The TF.js backend in use, for the member entry. */
  backend?: string;
  statusTimeoutMs?: number;
  /** Directory that relative evaluation patterns and outputs are resolved against. */
  cwd?: string;
  /** Where `dataset.eval` files may be (`TRIBUTARY_DATA_ROOT`); anywhere when unset. */
  dataRoots?: readonly string[];
  /** Where `output` may be (`TRIBUTARY_OUTPUT_ROOT`); anywhere when unset. */
  outputRoots?: readonly string[];
  /** Where evaluations are recorded for Prometheus. */
  metrics?: EvaluatorMetrics;
  /** Where this process serves its metrics, for the member entry. */
  metricsUrl?: string;
}

const ACTIVE_STATES = new Set(['running', 'waiting']);

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** See the file comment. Build with the connections, `start()`, and `stop()` on shutdown. */
export class Evaluator {
  private readonly runs = new Map<string, JobEvaluation>();
  private readonly rejected = new Set<string>();
  private readonly activities = new Map<string, JobActivity>();
  private readonly evaluationSets: EvaluationSetCache;
  private readonly beacon: MemberBeacon;
  private js: JetStreamClient | undefined;
  private jsm: JetStreamManager | undefined;
  /** Publishes every run's events; made in `start`. */
  private events: JobEventPublisher | undefined;
  private watch: { stop(): void } | undefined;
  private watching: Promise<void> | undefined;
  private updates: Promise<void> = Promise.resolve();

  constructor(
    private readonly nc: NatsConnection,
    private readonly buckets: Buckets,
    private readonly params: SnapshotParamsSource,
    private readonly logger: LineLogger,
    private readonly options: EvaluatorOptions,
  ) {
    this.evaluationSets = new EvaluationSetCache({ cwd: options.cwd, dataRoots: options.dataRoots });
    this.beacon = new MemberBeacon(buckets.members, {
      role: 'evaluator',
      id: options.id,
      pid: process.pid,
      host: hostname().split('.')[0] ?? hostname(),
      ...(options.backend === undefined ? {} : { backend: options.backend }),
      ...(options.metricsUrl ? { metricsUrl: options.metricsUrl } : {}),
    });
  }

  /** The run of a job, if the evaluator follows or exported it (for tests and logs). */
  run(jobId: string): JobEvaluation | undefined {
    return this.runs.get(jobId);
  }

  /** Starts watching the jobs bucket and keeping the member status. */
  async start(): Promise<void> {
    prepareJobSpecValidation();
    this.js = jetstream(this.nc);
    this.jsm = await jetstreamManager(this.nc);
    this.events = new JobEventPublisher(this.js, this.logger);
    this.beacon.start();
    const iter = await watchBucket(this.buckets.jobs, { name: 'watch of the jobs bucket', logger: this.logger });
    this.watch = iter;
    this.watching = (async () => {
      for await (const entry of iter) {
        // Changes are handled one at a time, in bucket order.
        this.updates = this.updates
          .then(() => this.onEntry(entry))
          .catch((err: unknown) => {
            this.logger.error(`handling job entry ${entry.key} failed: ${message(err)}`);
          });
      }
    })();
  }

  /** Stops watching and closes every run without exporting (an export under way finishes). */
  async stop(): Promise<void> {
    this.watch?.stop();
    await this.watching;
    await this.updates;
    await Promise.all([...this.runs.values()].map((run) => run.close()));
    this.runs.clear();
    await this.beacon.stop();
    await this.params.close();
    await this.events?.drain();
  }

  private async onEntry(entry: KvWatchEntry): Promise<void> {
    if (entry.operation !== 'PUT') {
      await this.forget(entry.key);
      return;
    }
    let record: JobRecord;
    try {
      record = parseJobRecord(entry.key, entry.value);
    } catch (err) {
      this.logger.warn(`skipping job record: ${message(err)}`);
      return;
    }
    const run = this.runs.get(record.jobId);
    const sameRun = run !== undefined && run.startedAt === record.startedAt;
    if (!sameRun && run !== undefined) await this.forget(record.jobId);

    if (ACTIVE_STATES.has(record.state)) {
      if (sameRun) {
        run.update(record);
        return;
      }
      const spec = await this.specOf(record);
      if (spec === undefined) return;
      const fresh = this.newRun(record, spec);
      this.logger.log(
        `job ${record.jobId}: following snapshots (metric ${spec.evaluation.metric}, ${spec.pservers.count} shards)`,
      );
      fresh.start();
      this.refreshBeacon();
      return;
    }

    if (record.state === 'stopped') {
      if (sameRun) {
        run.update(record);
        void this.finish(run);
        return;
      }
      await this.exportAfterRestart(record);
      return;
    }
    // failed: nothing to evaluate or export.
    if (sameRun) await this.forget(record.jobId);
  }

  /** A stopped job this process did not follow: exports it unless that was already done. */
  private async exportAfterRestart(record: JobRecord): Promise<void> {
    const spec = await this.specOf(record);
    if (spec === undefined) return;
    if ((await readExportedSummary(spec.output, record.jobId, record.startedAt)) !== undefined) {
      this.logger.log(`job ${record.jobId}: stopped and already exported to ${spec.output}; completing its history`);
      // An evaluator that died between the export and the last history line left it short.
      void new JobHistory(
        { events: this.events!, js: this.js!, jsm: this.jsm!, logger: this.logger },
        { jobId: record.jobId, startedAt: record.startedAt, output: spec.output, metric: spec.evaluation.metric },
      ).finish();
      return;
    }
    const stoppedMs = Date.parse(record.stoppedAt ?? record.startedAt);
    if (Date.now() - stoppedMs > EXPORT_AFTER_RESTART_MAX_AGE_MS) {
      this.logger.warn(`job ${record.jobId}: stopped at ${record.stoppedAt} and never exported; too old to export now`);
      return;
    }
    this.logger.log(`job ${record.jobId}: stopped but not exported yet; exporting`);
    void this.finish(this.newRun(record, spec));
  }

  private async finish(run: JobEvaluation): Promise<void> {
    const exported = await run.finish();
    if (!exported) this.logger.warn(`job ${run.jobId}: no model was exported`);
  }

  private newRun(record: JobRecord, spec: JobSpec): JobEvaluation {
    const run = new JobEvaluation(
      {
        js: this.js!,
        jsm: this.jsm!,
        events: this.events!,
        params: this.params,
        evaluationSets: this.evaluationSets,
        master: new MasterClient(this.nc, this.options.id, { logger: this.logger }),
        logger: this.logger,
        statusTimeoutMs: this.options.statusTimeoutMs ?? STATUS_TIMEOUT_MS,
        onActivity: (jobId, activity) => this.onActivity(jobId, activity),
        metrics: this.options.metrics,
      },
      record,
      spec,
    );
    this.runs.set(record.jobId, run);
    return run;
  }

  private async forget(jobId: string): Promise<void> {
    const run = this.runs.get(jobId);
    if (run === undefined) return;
    this.runs.delete(jobId);
    await run.close();
    this.refreshBeacon();
  }

  /**
   * The job's validated spec, or undefined (logged once per run) when it is not valid or its
   * `output` is outside the output roots.
   */
  private async specOf(record: JobRecord): Promise<JobSpec | undefined> {
    try {
      const spec = validateJobSpec(record.spec);
      if (this.options.outputRoots) await confineOutputPath(spec.output, this.options.outputRoots, this.options.cwd);
      return spec;
    } catch (err) {
      const key = `${record.jobId}@${record.startedAt}`;
      if (!this.rejected.has(key)) {
        this.rejected.add(key);
        this.logger.error(`job ${record.jobId}: cannot evaluate, its spec is not valid: ${message(err)}`);
      }
      return undefined;
    }
  }

  private onActivity(jobId: string, activity: JobActivity): void {
    if (activity === 'done') this.activities.delete(jobId);
    else this.activities.set(jobId, activity);
    this.refreshBeacon();
  }

  /** Member status: the latest busy job, else `watching` while some job is followed, else `idle`. */
  private refreshBeacon(): void {
    const busy = [...this.activities].pop();
    if (busy !== undefined) {
      this.beacon.update({ state: busy[1], jobId: busy[0] });
      return;
    }
    const following = [...this.runs.values()].find((run) => !run.done);
    this.beacon.update({ state: following === undefined ? 'idle' : 'watching', jobId: following?.jobId });
  }
}
