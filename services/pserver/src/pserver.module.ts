import { hostname } from 'node:os';
import { resolve } from 'node:path';
import {
  Inject,
  Injectable,
  Logger,
  Module,
  type BeforeApplicationShutdown,
  type DynamicModule,
  type OnApplicationBootstrap,
} from '@nestjs/common';
import { SUBJECTS, encodeJson, type Buckets, type NatsConnection, type SnapshotNotice } from '#libs/messaging';
import { BUCKETS, MemberBeacon, NATS_CONNECTION } from '#libs/service-runtime';
import { PserverGrpcServer } from './grpc-server.js';
import { ParameterShard } from './parameter-shard.js';
import { defaultDataDir, type PserverSettings } from './pserver-config.js';
import { ShardRegistration } from './shard-registration.js';

/** Injection token of the parameter server's validated settings. */
export const PSERVER_SETTINGS = Symbol('PSERVER_SETTINGS');
/** How often the member entry reports the jobs' versions. */
export const VERSION_REPORT_MS = 3_000;

/**
 * Runs one parameter server shard for the application's lifetime: serves gRPC, registers the
 * shard's address in the pservers bucket, announces snapshots on NATS, and on shutdown stops
 * taking calls, checkpoints every job and deregisters.
 */
@Injectable()
export class PserverService implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('Pserver');
  private shard?: ParameterShard;
  private server?: PserverGrpcServer;
  private registration?: ShardRegistration;
  private beacon?: MemberBeacon;
  private reportTimer?: NodeJS.Timeout;
  /** `host:port` clients reach this shard at, once started. */
  address = '';

  constructor(
    @Inject(NATS_CONNECTION) private readonly nc: NatsConnection,
    @Inject(BUCKETS) private readonly buckets: Buckets,
    @Inject(PSERVER_SETTINGS) private readonly settings: PserverSettings,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    const { shard: index, host, port, id } = this.settings;
    const dataDir = resolve(this.settings.dataDir ?? defaultDataDir(index));
    this.shard = new ParameterShard({
      shard: index,
      dataDir,
      memberTtlMs: this.settings.memberTtlMs,
      logger: this.logger,
      onSnapshot: (jobId, shard, version) => this.announceSnapshot(jobId, shard, version),
    });
    this.server = new PserverGrpcServer(this.shard, { host, port, logger: this.logger });
    const bound = await this.server.start();
    this.shard.start();
    const advertised = this.settings.advertiseHost ?? (isWildcard(host) ? hostname() : host);
    this.address = `${advertised.includes(':') ? `[${advertised}]` : advertised}:${bound.port}`;
    const startedAt = new Date().toISOString();
    this.registration = new ShardRegistration(
      this.buckets.pservers,
      { shard: index, address: this.address, pid: process.pid, id, startedAt },
      (err) => this.logger.warn(`registration of shard ${index}: ${err.message}`),
    );
    await this.registration.start();
    this.beacon = new MemberBeacon(this.buckets.members, {
      role: 'pserver',
      id,
      pid: process.pid,
      host: hostname(),
      shard: index,
      state: 'serving',
    });
    this.beacon.start();
    this.reportTimer = setInterval(() => this.reportVersions(), VERSION_REPORT_MS);
    this.reportTimer.unref();
    this.logger.log(`checkpoints in ${dataDir}`);
  }

  async beforeApplicationShutdown(): Promise<void> {
    clearInterval(this.reportTimer);
    // Stop taking calls and end the pulls that wait, then checkpoint what the last pushes did.
    const stopped = this.server?.stop();
    this.shard?.endWaits();
    await stopped;
    await this.shard?.close();
    await this.registration?.stop();
    await this.beacon?.stop();
  }

  private announceSnapshot(jobId: string, shard: number, version: number): void {
    const notice: SnapshotNotice = { jobId, shard, version, at: new Date().toISOString() };
    this.nc.publish(SUBJECTS.snapshots(jobId), encodeJson(notice));
  }

  private reportVersions(): void {
    const versions = this.shard?.versions() ?? {};
    this.beacon?.update({ versions });
  }
}

function isWildcard(host: string): boolean {
  return host === '0.0.0.0' || host === '::' || host === '[::]';
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
