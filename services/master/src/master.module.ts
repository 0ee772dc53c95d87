import { Module, type DynamicModule } from '@nestjs/common';
import { jetstreamManager } from '@nats-io/jetstream';
import type { CommonConfig } from '#libs/config';
import type { NatsConnection, RedisConnection } from '#libs/messaging';
import { NATS_CONNECTION, REDIS_CONNECTION } from '#libs/service-runtime';
import { DispatchLoop } from './dispatch-loop.js';
import { JobChannels } from './job-channels.js';
import { JobDirectory } from './job-directory.js';
import { JobIntake } from './job-intake.js';
import { JobStore } from './job-store.js';
import type { MasterConfig } from './master-config.js';
import { MasterPresence } from './master-presence.js';
import { JETSTREAM_MANAGER, MASTER_SETTINGS } from './master-tokens.js';
import { StatusResponder } from './status-responder.js';
import { StopControl } from './stop-control.js';
import { TaskExchange } from './task-exchange.js';
import { TrainerCensus } from './trainer-census.js';

/**
 * Wires the master: job intake, task dispatch, claims and reports, status and stop handling.
 * Needs `ConnectionsModule` (NATS, Redis, buckets) beside it.
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
        JobChannels,
        TrainerCensus,
        JobDirectory,
        DispatchLoop,
        TaskExchange,
        StatusResponder,
        StopControl,
        JobIntake,
        MasterPresence,
      ],
    };
  }
}
