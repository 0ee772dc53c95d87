import {
  Global,
  Inject,
  Injectable,
  Logger,
  Module,
  type DynamicModule,
  type OnApplicationShutdown,
} from '@nestjs/common';
import { redactedUrl, redisTlsOf, type CommonConfig } from '#libs/config';
import {
  connectNats,
  connectRedis,
  ensureStreams,
  openBuckets,
  type Buckets,
  type NatsConnection,
  type RedisConnection,
} from '#libs/messaging';
import { ServiceMetrics } from '#libs/service-metrics';
import { natsReadiness, redisReadiness } from './connection-readiness.js';
import { NatsLink } from './nats-link.js';
import { BUCKETS, NATS_CONNECTION, NATS_LINK, REDIS_CONNECTION, SERVICE_CONFIG, SERVICE_METRICS } from './tokens.js';

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
 * It provides the process's `ServiceMetrics` (a fresh one unless given), a `NatsLink` following
 * the NATS connection, and adds to its readiness one check per connection, failing while that
 * connection is down.
 */
@Global()
@Module({})
export class ConnectionsModule {
  static forRoot(
    config: CommonConfig & { id: string },
    role: string,
    metrics: ServiceMetrics = new ServiceMetrics({ processMetrics: false }),
  ): DynamicModule {
    const logger = new Logger('Connections');
    const { readiness } = metrics;
    return {
      module: ConnectionsModule,
      providers: [
        { provide: SERVICE_CONFIG, useValue: config },
        { provide: SERVICE_METRICS, useValue: metrics },
        {
          provide: NATS_CONNECTION,
          useFactory: async () => {
            readiness.set('nats', () => `connecting to ${redactedUrl(config.natsUrl)}`);
            const nc = await connectNats(config, `${role} ${config.id}`, logger);
            await ensureStreams(nc, config.jsReplicas);
            return nc;
          },
        },
        {
          provide: NATS_LINK,
          inject: [NATS_CONNECTION],
          useFactory: (nc: NatsConnection): NatsLink => {
            const link = new NatsLink(nc);
            readiness.set('nats', natsReadiness(link));
            return link;
          },
        },
        {
          provide: BUCKETS,
          inject: [NATS_CONNECTION],
          useFactory: (nc: NatsConnection): Promise<Buckets> => openBuckets(nc, config.jsReplicas),
        },
        {
          provide: REDIS_CONNECTION,
          useFactory: async () => {
            readiness.set('redis', () => `connecting to ${redactedUrl(config.redisUrl)}`);
            const redis = await connectRedis(
              config.redisUrl,
              config.id.replace(/[^A-Za-z0-9_-]/g, '-'),
              logger,
              redisTlsOf(config),
            );
            readiness.set('redis', redisReadiness(redis));
            return redis;
          },
        },
        ConnectionCloser,
      ],
      exports: [SERVICE_CONFIG, SERVICE_METRICS, NATS_CONNECTION, NATS_LINK, REDIS_CONNECTION, BUCKETS],
    };
  }
}
