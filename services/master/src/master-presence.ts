import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import type { KV } from '@nats-io/kv';
import { hostname } from 'node:os';
import { KV_BUCKETS, listBucketKeys, type Buckets, type MemberStatus, type NatsConnection } from '#libs/messaging';
import type { ServiceMetrics } from '#libs/service-metrics';
import { BUCKETS, MemberBeacon, NATS_CONNECTION, SERVICE_METRICS } from '#libs/service-runtime';
import type { LeaderDuty } from './leader-duty.js';
import { MASTER_SETTINGS } from './master-tokens.js';

/**
 * The master's entry in the members bucket: `master.<id>`, state `standby`, or `leader` while
 * it leads. A new leader drops the entries of masters that still say they lead (leaders that
 * died, whose entries would otherwise linger until they lapse), so `tributary ps` shows one.
 */
@Injectable()
export class MasterPresence implements LeaderDuty, OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('MasterPresence');
  private readonly beacon: MemberBeacon;
  private readonly members: KV;
  private closed = false;

  constructor(
    @Inject(NATS_CONNECTION) private readonly nc: NatsConnection,
    @Inject(BUCKETS) buckets: Buckets,
    @Inject(MASTER_SETTINGS) settings: { id: string },
    @Inject(SERVICE_METRICS) metrics: ServiceMetrics,
  ) {
    this.members = buckets.members;
    this.beacon = new MemberBeacon(buckets.members, {
      role: 'master',
      id: settings.id,
      pid: process.pid,
      host: hostname(),
      state: 'standby',
      leader: false,
      ...(metrics.url ? { metricsUrl: metrics.url } : {}),
    });
  }

  onApplicationBootstrap(): void {
    this.beacon.start();
  }

  async onModuleDestroy(): Promise<void> {
    this.closed = true;
    await this.beacon.stop();
  }

  async takeOffice(): Promise<void> {
    if (this.closed) return;
    this.beacon.update({ state: 'leader', leader: true });
    await this.dropFormerLeaders().catch((err: Error) =>
      this.logger.warn(`clearing former leaders from the members bucket failed: ${err.message}`),
    );
  }

  async leaveOffice(): Promise<void> {
    if (!this.closed) this.beacon.update({ state: 'standby', leader: false });
  }

  /** A deposed leader still alive puts its entry back (as standby) at its next refresh. */
  private async dropFormerLeaders(): Promise<void> {
    for (const key of await listBucketKeys(this.nc, KV_BUCKETS.members, 'master.>')) {
      if (key === this.beacon.key) continue;
      const entry = await this.members.get(key);
      if (entry?.operation !== 'PUT') continue;
      let status: Partial<MemberStatus>;
      try {
        status = entry.json<MemberStatus>();
      } catch {
        continue;
      }
      if (status.leader === true) await this.members.delete(key);
    }
  }
}
