import { Global, Inject, Injectable, Logger, Module, type DynamicModule, type OnApplicationShutdown } from '@nestjs/common';
import type { CommonConfig } from '#libs/config';
import {
  connectNats,
  connectRedis,
  ensureStreams,
  openBuckets,
  type Buckets,
  type NatsConnection,
  type RedisConnection,
} from '#libs/messaging';
import { BUCKETS, NATS_CONNECTION, REDIS_CONNECTION, SERVICE_CONFIG } from './tokens.js';

@Injectable()
class ConnectionCloser implements OnApplicationShutdown {
  constructor(
    @Inject(NATS_CONNECTION) private readonly nc: NatsConnection,
    @Inject(REDIS_CONNECTION) private readonly redis: RedisConnection,
  ) {}

  async onApplicationShutdown(): Promise<void> {
    await this.nc.drain().catch(() => this.nc.close());
    await this.redis.close().catch(() => this.redis.destroy());
  }
}

/**
 * Connects to NATS (creating Tributary's streams and buckets) and Redis for one service, and
 * closes both when the application shuts down (after every other provider's shutdown hooks).
 */
@Global()
@Module({})
export class ConnectionsModule {
  static forRoot(config: CommonConfig & { id: string }, role: string): DynamicModule {
    const logger = new Logger('Connections');
    return {
      module: ConnectionsModule,
      providers: [
        { provide: SERVICE_CONFIG, useValue: config },
        {
          provide: NATS_CONNECTION,
          useFactory: async () => {
            const nc = await connectNats(config.natsUrl, `${role} ${config.id}`, logger);
            await ensureStreams(nc);
            return nc;
          },
        },
        {
          provide: BUCKETS,
          inject: [NATS_CONNECTION],
          useFactory: (nc: NatsConnection): Promise<Buckets> => openBuckets(nc),
        },
        {
          provide: REDIS_CONNECTION,
          useFactory: () => connectRedis(config.redisUrl, config.id.replace(/[^A-Za-z0-9_-]/g, '-'), logger),
        },
        ConnectionCloser,
      ],
      exports: [SERVICE_CONFIG, NATS_CONNECTION, REDIS_CONNECTION, BUCKETS],
    };
  }
}
