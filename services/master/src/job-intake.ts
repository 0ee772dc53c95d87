import { Inject, Injectable, Logger } from '@nestjs/common';
import type { JetStreamManager, JsMsg } from '@nats-io/jetstream';
import { randomBytes } from 'node:crypto';
import {
  InvalidJobSpecError,
  jobLimitViolations,
  parseJobSpec,
  prepareJobSpecValidation,
  specSizeViolation,
  type JobSpec,
} from '#libs/job-spec';
import { CONSUMERS, JOB_ID_PATTERN, STREAMS } from '#libs/messaging';
import { expandPatterns, indexFileList, type MultiFileIndex } from '#libs/recordio';
import {
  PathOutsideRootsError,
  confineDataPaths,
  confineOutputPath,
  confinePath,
  type CommonConfig,
} from '#libs/config';
import { DispatchLoop } from './dispatch-loop.js';
import { DurablePull } from './durable-pull.js';
import { EmptyDatasetError } from './errors.js';
import { JobChannels } from './job-channels.js';
import { JobRoster } from './job-roster.js';
import { withPartition } from './job-partition.js';
import { withJobSeed } from './job-seed.js';
import { queueOptions, type JobDriver } from './job-driver.js';
import type { LeaderDuty } from './leader-duty.js';
import type { StoredJob } from './job-store.js';
import type { MasterConfig } from './master-config.js';
import { JETSTREAM_MANAGER, MASTER_SETTINGS } from './master-tokens.js';
import { planTasks } from './task-plan.js';
import { TaskQueue } from './task-queue.js';

/** The job id used in events about a spec whose id cannot be read. */
export const INVALID_JOB_ID = 'invalid';

/**
 * Takes job specs from the jobs stream (durable `master`): validates, picks a seed for a spec
 * that gave none, indexes the training files, cuts them into tasks, persists the job (its spec
 * with the seed), then announces it (jobs bucket entry, trainers' consumer, `started` event),
 * has its first tasks dispatched at once, and acks. A refused spec gets a `failed` event marked
 * `refused` naming the field, and changes nothing. A spec redelivered after a crash or a lost
 * Redis reply (same stream sequence as the stored job) is recognised: the stored job is run, if
 * no driver has it, and announced again. Only the leader takes specs.
 */
@Injectable()
export class JobIntake implements LeaderDuty {
  private readonly logger = new Logger('JobIntake');
  private readonly pull: DurablePull;

  constructor(
    @Inject(JETSTREAM_MANAGER) jsm: JetStreamManager,
    @Inject(JobRoster) private readonly roster: JobRoster,
    @Inject(JobChannels) private readonly channels: JobChannels,
    @Inject(MASTER_SETTINGS) private readonly settings: CommonConfig & MasterConfig,
    @Inject(DispatchLoop) private readonly dispatch: Pick<DispatchLoop, 'dispatchNow'>,
  ) {
    this.pull = new DurablePull(jsm, STREAMS.jobs.name, CONSUMERS.master, this.logger);
  }

  async takeOffice(): Promise<void> {
    prepareJobSpecValidation();
    await this.pull.start((msg) => this.handle(msg));
  }

  async leaveOffice(): Promise<void> {
    await this.pull.stop();
  }

  private async handle(msg: JsMsg): Promise<void> {
    const spec = this.parse(msg);
    if (spec !== undefined) await this.take(spec, msg);
    msg.ack();
  }

  /** The spec of a message, when it is valid and within the limits; else it is refused. */
  private parse(msg: JsMsg): JobSpec | undefined {
    try {
      const tooBig = specSizeViolation(msg.data.length, this.settings.maxJobSpecBytes);
      if (tooBig !== undefined) throw new InvalidJobSpecError([tooBig]);
      const spec = parseJobSpec(msg.data);
      const over = jobLimitViolations(spec, { maxParameters: this.settings.maxJobParameters });
      if (over.length > 0) throw new InvalidJobSpecError(over, { jobId: spec.id });
      return spec;
    } catch (err) {
      if (!(err instanceof InvalidJobSpecError)) throw err;
      const jobId = err.jobId !== undefined && JOB_ID_PATTERN.test(err.jobId) ? err.jobId : INVALID_JOB_ID;
      this.refuse(jobId, err.message, err.violations[0]?.field);
      return undefined;
    }
  }

  private async take(submitted: JobSpec, msg: JsMsg): Promise<void> {
    const jobId = submitted.id;
    const existing = await this.channels.store.submission(jobId);
    if (existing !== undefined && existing.submitSeq === msg.seq) {
      // Taken before: a crash cut the announcement short (or the ack), or Redis applied the
      // creation but its reply was lost. Drive the stored job if no driver does, and announce it.
      const stored = await this.channels.store.load(jobId);
      if (stored !== undefined && stored.submitSeq === msg.seq) {
        this.logger.log(`spec of job ${jobId} (message #${msg.seq}) delivered again; it is already stored`);
        const driver = this.roster.adopt(stored);
        if (driver.running) await this.announce(driver);
        return;
      }
    }
    if (existing !== undefined && existing.state === 'running') {
      this.refuse(jobId, `job ${jobId} already exists and is running`, 'id');
      return;
    }
    const running = this.roster.running().length;
    if (running >= this.settings.maxRunningJobs) {
      this.refuse(
        jobId,
        `${running} jobs are running, as many as MAX_RUNNING_JOBS (${this.settings.maxRunningJobs})`,
        undefined,
      );
      return;
    }
    this.channels.publishEvent({ type: 'submitted', jobId });
    const spec = withPartition(withJobSeed(submitted));
    try {
      await this.confine(spec);
    } catch (err) {
      if (!(err instanceof PathOutsideRootsError)) throw err;
      this.refuse(jobId, err.message, err.field);
      return;
    }
    let index: MultiFileIndex;
    try {
      index = await this.index(spec);
    } catch (err) {
      if (err instanceof PathOutsideRootsError) {
        this.refuse(jobId, err.message, err.field);
        return;
      }
      this.refuse(jobId, `dataset.train: ${(err as Error).message}`, 'dataset.train');
      return;
    }
    const plan = planTasks(index.chunks, spec.training.chunksPerTask);
    const queue = TaskQueue.create(
      { jobId, runId: randomBytes(4).toString('hex'), taskCount: plan.length, startedAt: Date.now() },
      queueOptions(spec, this.settings),
    );
    const job: StoredJob = { spec, plan, submitSeq: msg.seq, queue: queue.snapshot() };
    // Messages an earlier job of the same id left in the tasks stream must not reach trainers.
    if (existing !== undefined) await this.channels.purgeTasks(jobId);
    const driver = await this.roster.add(job);
    this.logger.log(
      `job ${jobId}: ${index.totalRecords} records in ${index.totalChunks} chunks of ${index.files.length} files, ` +
        `${plan.length} tasks; seed ${spec.training.seed}${submitted.training.seed === undefined ? ' (picked)' : ''}, ` +
        `data ${spec.training.shuffle ? 'shuffled' : 'in file order'}`,
    );
    await this.announce(driver);
  }

  /**
   * Refuses data and output paths outside the roots, as far as this machine sees them; the
   * trainers and the evaluator check again where they open the files.
   */
  private async confine(spec: JobSpec): Promise<void> {
    const { dataRoots, outputRoots } = this.settings;
    await confineDataPaths('train', spec.dataset.train, dataRoots);
    await confineDataPaths('eval', spec.dataset.eval, dataRoots);
    await confineOutputPath(spec.output, outputRoots);
  }

  private async index(spec: JobSpec): Promise<MultiFileIndex> {
    const files = await expandPatterns(spec.dataset.train);
    // A match may be a link that leads out of the roots: checked before any file is opened.
    for (const file of files) {
      await confinePath(file, this.settings.dataRoots, { field: 'dataset.train', variable: 'TRIBUTARY_DATA_ROOT' });
    }
    const index = await indexFileList(files);
    if (index.totalChunks === 0) throw new EmptyDatasetError(spec.id);
    return index;
  }

  private async announce(driver: JobDriver): Promise<void> {
    await this.channels.ensureTrainerConsumer(driver.jobId);
    await driver.publishRecord();
    const status = driver.status();
    this.channels.publishEvent({
      type: 'started',
      jobId: driver.jobId,
      epoch: status.epoch,
      tasksPerEpoch: status.tasks.total,
      records: driver.plan.reduce((sum, t) => sum + t.records, 0),
      ...(status.seed !== undefined ? { seed: status.seed } : {}),
    });
    this.dispatch.dispatchNow();
  }

  private refuse(jobId: string, error: string, field: string | undefined): void {
    this.logger.warn(`refused job ${jobId}: ${error}`);
    // Marked as a refusal: a job of the same id that is running must not take it for its end.
    this.channels.publishEvent({
      type: 'failed',
      jobId,
      error,
      refused: true,
      ...(field !== undefined ? { field } : {}),
    });
  }
}
