import { hostname } from 'node:os';
import { resolve } from 'node:path';
import { advertisedAddress, pserverTlsOf } from '#libs/config';
import {
  Inject,
  Injectable,
  Logger,
  Module,
  type BeforeApplicationShutdown,
  type DynamicModule,
  type OnApplicationBootstrap,
} from '@nestjs/common';
import {
  SUBJECTS,
  encodeJson,
  type Buckets,
  type NatsConnection,
  type RedisConnection,
  type RoundNotice,
  type SnapshotNotice,
} from '#libs/messaging';
import { selectKernelBackend } from '#libs/optimizer';
import { KERNELS_ENV_VAR } from '#libs/wasm-simd';
import type { ServiceMetrics } from '#libs/service-metrics';
import { BUCKETS, MemberBeacon, NATS_CONNECTION, REDIS_CONNECTION, SERVICE_METRICS } from '#libs/service-runtime';
import { PserverGrpcServer } from './grpc-server.js';
import { JobLifecycle } from './job-lifecycle.js';
import { ParameterShard } from './parameter-shard.js';
import { PserverMetrics } from './pserver-metrics.js';
import { defaultDataDir, shardLeaseKey, type PserverSettings } from './pserver-config.js';
import { ShardLease, LeaseWaitAbortedError } from './shard-lease.js';
import { ShardRegistration } from './shard-registration.js';

/** Injection token of the parameter server's validated settings. */
export const PSERVER_SETTINGS = Symbol('PSERVER_SETTINGS');
/** How often the member entry reports the jobs' versions. */
export const VERSION_REPORT_MS = 3_000;

/**
 * Runs one parameter server shard for the application's lifetime. It picks its optimizer
 * kernels (WebAssembly SIMD128, or plain JavaScript and why), logs and publishes which, then
 * takes the shard's lease in Redis, standing by while another process holds it; then resumes
 * the live jobs it has checkpoints of, serves gRPC, registers the shard's address in the
 * pservers bucket, announces snapshots on NATS, checkpoints jobs that stop, and on shutdown
 * stops taking calls, checkpoints every job, deregisters and gives the lease back. A process
 * that loses the lease stops serving and exits at once, writing nothing more.
 */
@Injectable()
export class PserverService implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('Pserver');
  private shard?: ParameterShard;
  private server?: PserverGrpcServer;
  private registration?: ShardRegistration;
  private beacon?: MemberBeacon;
  private lease?: ShardLease;
  private lifecycle?: JobLifecycle;
  private readonly standby = new AbortController();
  private reportTimer?: NodeJS.Timeout;
  /** `host:port` clients reach this shard at, once serving; empty while standing by. */
  address = '';

  constructor(
    @Inject(NATS_CONNECTION) private readonly nc: NatsConnection,
    @Inject(REDIS_CONNECTION) private readonly redis: RedisConnection,
    @Inject(BUCKETS) private readonly buckets: Buckets,
    @Inject(PSERVER_SETTINGS) private readonly settings: PserverSettings,
    @Inject(SERVICE_METRICS) private readonly metrics: ServiceMetrics,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    const { shard: index, host, port, id } = this.settings;
    const dataDir = resolve(this.settings.dataDir ?? defaultDataDir(index));
    const { backend: kernels, fallbackReason } = selectKernelBackend(this.settings.kernels);
    if (fallbackReason === undefined) this.logger.log('optimizer kernels: wasm-simd (WebAssembly SIMD128)');
    else if (this.settings.kernels === 'js') {
      this.logger.log(`optimizer kernels: js (the default; ${KERNELS_ENV_VAR}=auto runs the WebAssembly SIMD128 ones)`);
    } else this.logger.warn(`optimizer kernels: js, as WebAssembly SIMD128 is unavailable: ${fallbackReason}`);
    this.beacon = new MemberBeacon(this.buckets.members, {
      role: 'pserver',
      id,
      pid: process.pid,
      host: hostname(),
      shard: index,
      state: 'standby',
      kernels: kernels.name,
      ...(this.metrics.url ? { metricsUrl: this.metrics.url } : {}),
    });
    this.beacon.start();
    this.metrics.readiness.set('grpc', () => {
      if (this.server?.serving) return undefined;
      return this.server ? 'the gRPC server has stopped' : `standing by for shard ${index} or starting`;
    });
    const shardMetrics = new PserverMetrics(this.metrics, index);
    this.lease = new ShardLease(this.redis, {
      key: shardLeaseKey(this.settings.keyPrefix, index),
      shard: index,
      id,
      ttlMs: this.settings.leaseTtlMs,
      logger: this.logger,
      onLost: (reason) => this.onLeaseLost(reason),
    });
    // The service's own signal handling starts once the application is up; a standby waits
    // before that, so it answers SIGTERM itself: it holds nothing and leaves at once.
    const onSignal = (signal: NodeJS.Signals) => {
      this.logger.log(`${signal} received while standing by; exiting`);
      this.standby.abort();
    };
    process.once('SIGTERM', onSignal).once('SIGINT', onSignal);
    try {
      await this.lease.acquire(this.standby.signal);
    } catch (err) {
      if (!(err instanceof LeaseWaitAbortedError)) throw err;
      await this.beacon.stop();
      this.exit(0);
      return;
    } finally {
      process.off('SIGTERM', onSignal).off('SIGINT', onSignal);
    }
    this.shard = new ParameterShard({
      shard: index,
      dataDir,
      memberTtlMs: this.settings.memberTtlMs,
      cutGraceMs: this.settings.cutGraceMs,
      logger: this.logger,
      kernels,
      metrics: shardMetrics,
      onSnapshot: (jobId, shard, version) => this.announceSnapshot(jobId, shard, version),
      onRoundWaiting: (jobId, shard, version) => this.announceRound(jobId, shard, version),
    });
    shardMetrics.follow(this.shard);
    this.lifecycle = new JobLifecycle(this.nc, this.buckets.jobs, this.shard, { logger: this.logger });
    const live = await this.lifecycle.start();
    const resumed = await this.shard.preload(live);
    if (resumed.length > 0) this.logger.log(`resumed ${resumed.length} job(s) before serving: ${resumed.join(', ')}`);
    this.server = new PserverGrpcServer(this.shard, {
      host,
      port,
      logger: this.logger,
      tls: pserverTlsOf(this.settings),
    });
    const bound = await this.server.start();
    this.shard.start();
    this.address = advertisedAddress(host, bound.port, this.settings.advertiseHost);
    const startedAt = new Date().toISOString();
    this.registration = new ShardRegistration(
      this.buckets.pservers,
      { shard: index, address: this.address, pid: process.pid, id, startedAt },
      (err) => this.logger.warn(`registration of shard ${index}: ${err.message}`),
    );
    await this.registration.start();
    this.beacon.update({ state: 'serving', versions: this.shard.versions() });
    this.reportTimer = setInterval(() => this.reportVersions(), VERSION_REPORT_MS);
    this.reportTimer.unref();
    this.logger.log(`checkpoints in ${dataDir}`);
  }

  async beforeApplicationShutdown(): Promise<void> {
    this.standby.abort();
    clearInterval(this.reportTimer);
    this.lifecycle?.stop();
    // Stop taking calls and end the pulls that wait, then checkpoint what the last pushes did;
    // only then may a standby take the shard over.
    const stopped = this.server?.stop();
    this.shard?.endWaits();
    await stopped;
    await this.shard?.close();
    await this.registration?.stop();
    await this.lease?.release();
    await this.beacon?.stop();
  }

  /** Another process serves the shard now (or may): stop at once, write nothing, exit. */
  private onLeaseLost(reason: string): void {
    this.logger.error(
      `shard ${this.settings.shard}: lost the ownership lease: ${reason}; stopping without another write and exiting`,
    );
    clearInterval(this.reportTimer);
    this.lifecycle?.stop();
    this.shard?.fence();
    void this.server?.stop(0);
    this.exit(1);
  }

  /** Ends the process (a supervisor restarts it, as a standby if the shard is taken). */
  protected exit(code: number): void {
    process.exit(code);
  }

  private announceSnapshot(jobId: string, shard: number, version: number): void {
    const notice: SnapshotNotice = { jobId, shard, version, at: new Date().toISOString() };
    this.nc.publish(SUBJECTS.snapshots(jobId), encodeJson(notice));
  }

  /** Tells the job's trainers that its round on `version` has its first delta (`roundEnd: first`). */
  private announceRound(jobId: string, shard: number, version: number): void {
    const notice: RoundNotice = { jobId, shard, version };
    this.nc.publish(SUBJECTS.rounds(jobId), encodeJson(notice));
  }

  private reportVersions(): void {
    const versions = this.shard?.versions() ?? {};
    this.beacon?.update({ versions, stepPhases: this.shard?.stepPhases() });
  }
}

/** Wires the parameter server; needs the connections module for NATS and the buckets. */
@Module({})
export class PserverModule {
  static forRoot(config: PserverSettings): DynamicModule {
    return {
      module: PserverModule,
      providers: [{ provide: PSERVER_SETTINGS, useValue: config }, PserverService],
      exports: [PserverService],
    };
  }
}
