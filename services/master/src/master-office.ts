import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import type { LeaderDuty } from './leader-duty.js';
import { Leadership, type LeaderRole } from './leadership.js';
import { LEADER_DUTIES } from './master-tokens.js';

/**
 * Runs the master's leader duties while it holds the leader lease: on taking office they start
 * in their listed order (jobs reloaded from Redis first, presence `leader` last); on losing the
 * lease they all stop at once. Shutting down leaves office and gives the lease back, so a
 * standby takes over without waiting for it to expire.
 */
@Injectable()
export class MasterOffice implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('MasterOffice');

  constructor(
    @Inject(Leadership) private readonly leadership: Leadership,
    @Inject(LEADER_DUTIES) private readonly duties: readonly LeaderDuty[],
  ) {}

  /** `leader` while this master leads, `standby` otherwise. */
  get role(): LeaderRole {
    return this.leadership.role;
  }

  async onApplicationBootstrap(): Promise<void> {
    await this.leadership.start({
      takeOffice: async (fence) => {
        for (const duty of this.duties) await duty.takeOffice(fence);
      },
      leaveOffice: async (reason) => {
        this.logger.log(`leaving office: ${reason}`);
        const left = await Promise.allSettled([...this.duties].reverse().map((duty) => duty.leaveOffice()));
        for (const r of left)
          if (r.status === 'rejected') this.logger.warn(`a duty failed to stop: ${String(r.reason)}`);
      },
    });
  }

  async onModuleDestroy(): Promise<void> {
    await this.leadership.stop();
  }
}
