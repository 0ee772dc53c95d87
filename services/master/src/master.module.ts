import { Logger, Module, type DynamicModule } from '@nestjs/common';
import { jetstreamManager } from '@nats-io/jetstream';
import type { CommonConfig } from '#libs/config';
import type { NatsConnection, RedisConnection } from '#libs/messaging';
import { NATS_CONNECTION, REDIS_CONNECTION } from '#libs/service-runtime';
import { DispatchLoop } from './dispatch-loop.js';
import { JobChannels } from './job-channels.js';
import { JobRoster } from './job-roster.js';
import { JobIntake } from './job-intake.js';
import { JobRetention } from './job-retention.js';
import { JobStore } from './job-store.js';
import type { LeaderDuty } from './leader-duty.js';
import { LeaderLease, leaseKeys } from './leader-lease.js';
import { Leadership } from './leadership.js';
import type { MasterConfig } from './master-config.js';
import { MasterMetrics } from './master-metrics.js';
import { MasterOffice } from './master-office.js';
import { MasterPresence } from './master-presence.js';
import { JETSTREAM_MANAGER, LEADER_DUTIES, MASTER_SETTINGS } from './master-tokens.js';
import { StatusResponder } from './status-responder.js';
import { StoreDurabilityCheck } from './store-durability.js';
import { StopControl } from './stop-control.js';
import { TaskExchange } from './task-exchange.js';
import { TrainerCensus } from './trainer-census.js';

/**
 * The leader's duties, in the order they start on taking office: jobs reloaded from Redis,
 * status, claims and reports, dispatch, stop messages, new specs, the retention sweep, the
 * leader's metrics, and last the `leader` presence.
 */
const DUTIES = [
  JobRoster,
  StatusResponder,
  TaskExchange,
  DispatchLoop,
  StopControl,
  JobIntake,
  JobRetention,
  MasterMetrics,
  MasterPresence,
];

/**
 * Wires the master: leader lease and office, job intake, task dispatch, claims and reports,
 * status and stop handling. Needs `ConnectionsModule` (NATS, Redis, buckets) beside it.
 */
@Module({})
export class MasterModule {
  static forRoot(config: CommonConfig & MasterConfig & { id: string }): DynamicModule {
    return {
      module: MasterModule,
      providers: [
        { provide: MASTER_SETTINGS, useValue: config },
        {
          provide: JETSTREAM_MANAGER,
          inject: [NATS_CONNECTION],
          useFactory: (nc: NatsConnection) => jetstreamManager(nc),
        },
        {
          provide: JobStore,
          inject: [REDIS_CONNECTION],
          useFactory: (redis: RedisConnection) => new JobStore(redis, config.keyPrefix),
        },
        {
          provide: Leadership,
          inject: [REDIS_CONNECTION],
          useFactory: (redis: RedisConnection) =>
            new Leadership(new LeaderLease(redis, leaseKeys(config.keyPrefix), config.id, config.leaseTtlMs), {
              name: `master ${config.id}`,
              logger: new Logger('Leadership'),
            }),
        },
        JobChannels,
        TrainerCensus,
        ...DUTIES,
        { provide: LEADER_DUTIES, inject: DUTIES, useFactory: (...duties: LeaderDuty[]) => duties },
        MasterOffice,
        StoreDurabilityCheck,
      ],
    };
  }
}
