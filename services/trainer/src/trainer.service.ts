import { FAULT_REPORT_BUDGET_MS } from './defaults.js';
import { hostname } from 'node:os';
import {
  Inject,
  Injectable,
  Logger,
  type BeforeApplicationShutdown,
  type OnApplicationBootstrap,
} from '@nestjs/common';
import { pserverTlsOf, type CommonConfig } from '#libs/config';
import { TfjsLearner, byteConversion, selectBackend, type BackendInfo, type Learner } from '#libs/learner';
import { MasterClient } from '#libs/master-client';
import type { Buckets, NatsConnection } from '#libs/messaging';
import { KvShardDirectory } from '#libs/pserver-client';
import { wasmSnappyUnavailableReason } from '#libs/recordio';
import type { ServiceMetrics } from '#libs/service-metrics';
import { BUCKETS, MemberBeacon, NATS_CONNECTION, SERVICE_CONFIG, SERVICE_METRICS } from '#libs/service-runtime';
import { confinedChunkSource } from './confined-chunks.js';
import { JobRecordsView } from './job-records-view.js';
import { JobTrainer, type PserverConnection } from './job-trainer.js';
import { learnerOptions } from './learner-options.js';
import { LearnerThread, usesLearnerThread, type LearnerJob } from './learner-thread.js';
import { MeteredPserverClient } from './metered-pserver-client.js';
import { watchRoundNotices } from './round-notices.js';
import type { TrainerConfig } from './trainer-config.js';
import { TrainerMetrics } from './trainer-metrics.js';
import { TrainerWorker } from './trainer-worker.js';

/**
 * Describes the backend for the start-up line, e.g. `wasm-simd (SIMD on, 1 thread, wasm-simd
 * kernels)`, on the plain JavaScript kernel path `... js kernels: TRIBUTARY_KERNELS=js)`, or
 * `gpu (webgpu, nvidia hopper (NVIDIA H100 PCIe))`.
 */
export function describeBackend(info: BackendInfo): string {
  const threads = `${info.threads} thread${info.threads === 1 ? '' : 's'}`;
  if (info.name !== 'wasm') {
    return `${info.kind} (${info.name}, ${info.device ?? threads})`;
  }
  const kernels = info.kernels
    ? `, ${info.kernels.path} kernels${info.kernels.reason ? `: ${info.kernels.reason}` : ''}`
    : '';
  return `${info.kind} (SIMD ${info.simd ? 'on' : 'off'}, ${threads}${kernels})`;
}

/**
 * The trainer process: picks the TF.js backend, keeps its member status fresh, and runs the
 * `TrainerWorker` over the jobs bucket. On shutdown (SIGTERM) the worker is preempted first:
 * the current minibatch is finished and the task handed back before the connections close.
 */
@Injectable()
export class TrainerService implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('Trainer');
  private beacon?: MemberBeacon;
  private worker?: TrainerWorker;
  private learnerThread?: Promise<LearnerThread>;
  private jobRecords?: JobRecordsView;

  constructor(
    @Inject(NATS_CONNECTION) private readonly nc: NatsConnection,
    @Inject(BUCKETS) private readonly buckets: Buckets,
    @Inject(SERVICE_CONFIG) private readonly config: CommonConfig & TrainerConfig & { id: string },
    @Inject(SERVICE_METRICS) private readonly serviceMetrics: ServiceMetrics,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    const { id } = this.config;
    const pserverTls = pserverTlsOf(this.config);
    const choice = this.config.backend === 'auto' ? '' : this.config.backend;
    const backend = await selectBackend(choice);
    this.logger.log(`trainer ${id} using backend ${describeBackend(backend)}`);
    const createLearner = (spec: LearnerJob): Learner =>
      usesLearnerThread(this.config.learnerThread, spec)
        ? LearnerThread.learner(this.startLearnerThread(choice), spec)
        : new TfjsLearner(learnerOptions(spec, (line) => this.logger.log(line)));
    // At the normal level: a trainer on a GPU machine that ends up on the CPU must say why.
    for (const reason of backend.skipped) this.logger.log(`backend passed over: ${reason}`);
    const plainChunks = wasmSnappyUnavailableReason();
    this.logger.log(
      plainChunks === undefined
        ? 'chunks: snappy and CRC-32C in WebAssembly'
        : `chunks: snappy and CRC-32C in plain JavaScript (${plainChunks})`,
    );
    this.logger.log(
      byteConversion().kernel === 'wasm-simd'
        ? 'features: uint8 to float32 in WebAssembly SIMD128'
        : 'features: uint8 to float32 in plain JavaScript',
    );

    this.beacon = new MemberBeacon(this.buckets.members, {
      role: 'trainer',
      id,
      pid: process.pid,
      host: hostname(),
      backend: backend.kind,
      ...(backend.kernels ? { kernels: backend.kernels.path } : {}),
      ...(this.serviceMetrics.url ? { metricsUrl: this.serviceMetrics.url } : {}),
    });
    this.beacon.start();
    const beacon = this.beacon;

    const metrics = new TrainerMetrics(this.serviceMetrics);
    const master = new MasterClient(this.nc, id, { logger: this.logger, jsReplicas: this.config.jsReplicas });
    this.jobRecords = new JobRecordsView(await master.watchJobs());
    const jobTrainer = new JobTrainer({
      master,
      createLearner,
      readChunk: confinedChunkSource(this.config.dataRoots),
      watchRounds: (jobId, onNotice) => watchRoundNotices(this.nc, jobId, onNotice, this.logger),
      chunkCacheBytes: this.config.chunkCacheMb * 1024 * 1024,
      connectPservers: async (spec, params): Promise<PserverConnection> => {
        const directory = await KvShardDirectory.open(this.buckets.pservers, { shardCount: spec.pservers.count });
        const client = new MeteredPserverClient(
          {
            jobId: spec.id,
            trainerId: id,
            params,
            directory,
            ...(spec.pservers.partition ? { partition: spec.pservers.partition } : {}),
            client: { transfer: { gradients: spec.transfer.dtype, params: spec.transfer.params }, tls: pserverTls },
          },
          metrics,
          spec.transfer,
        );
        return {
          client,
          close: () => {
            client.close();
            directory.close();
          },
        };
      },
      logger: this.logger,
      status: (patch) => beacon.update(patch),
      metrics,
      idleTaskWaitMs: this.config.idleTaskWaitMs,
      claimAheadMs: this.config.claimAheadMs,
      progressLogIntervalMs: this.config.progressLogIntervalMs,
      pserverOutageBudgetMs: this.config.pserverOutageBudgetMs,
      quorumHeartbeatMs: this.config.quorumHeartbeatMs,
      leaveWhenFull: (jobId) => this.worker?.hasOtherJob(jobId) === true,
    });
    this.worker = new TrainerWorker({
      jobRecords: this.jobRecords,
      jobTrainer,
      events: (jobId) => master.events(jobId),
      reportFault: (record, error) =>
        master.reportFault(record.jobId, record.startedAt, error, { budgetMs: FAULT_REPORT_BUDGET_MS }),
      logger: this.logger,
    });
    this.worker.start();
  }

  async beforeApplicationShutdown(): Promise<void> {
    await this.worker?.stop();
    this.jobRecords?.stop();
    await this.beacon?.stop();
    const thread = this.learnerThread;
    this.learnerThread = undefined;
    await thread?.then((t) => t.close()).catch(() => undefined);
  }

  /**
   * The learner thread (`TRAINER_LEARNER_THREAD`), started when a job first needs it and kept;
   * one that failed to start is tried again by the next job.
   */
  private startLearnerThread(choice: string): Promise<LearnerThread> {
    this.learnerThread ??= LearnerThread.start(choice).then(
      (thread) => {
        this.logger.log(`learner thread started (backend ${describeBackend(thread.backend)})`);
        thread.onExit = (err) => {
          // A trainer whose learner thread died cannot train: end, to be restarted.
          this.logger.error(`${err.message}; exiting`);
          process.exit(1);
        };
        return thread;
      },
      (err: Error) => {
        this.learnerThread = undefined;
        throw err;
      },
    );
    return this.learnerThread;
  }
}
