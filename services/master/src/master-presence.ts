import { Inject, Injectable, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { hostname } from 'node:os';
import type { Buckets } from '#libs/messaging';
import { BUCKETS, MemberBeacon } from '#libs/service-runtime';
import { MASTER_SETTINGS } from './master-tokens.js';

/** The master's entry in the members bucket: `master.<id>`, state `leader`. */
@Injectable()
export class MasterPresence implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly beacon: MemberBeacon;

  constructor(@Inject(BUCKETS) buckets: Buckets, @Inject(MASTER_SETTINGS) settings: { id: string }) {
    this.beacon = new MemberBeacon(buckets.members, {
      role: 'master',
      id: settings.id,
      pid: process.pid,
      host: hostname(),
      state: 'leader',
      leader: true,
    });
  }

  onApplicationBootstrap(): void {
    this.beacon.start();
  }

  async onModuleDestroy(): Promise<void> {
    await this.beacon.stop();
  }
}
