import { Inject, Injectable, Logger, type OnApplicationBootstrap } from '@nestjs/common';
import type { RedisConnection } from '#libs/messaging';
import { REDIS_CONNECTION } from '#libs/service-runtime';

/**
 * Why a Redis server with these `appendonly` and `appendfsync` settings may lose writes it has
 * already answered, or undefined when it keeps every one (append-only file, fsync per write).
 * A lost answered write would take the master back in time after a Redis crash: tasks trainers
 * already trained would be dispatched again.
 */
export function durabilityWarning(settings: Readonly<Record<string, string | undefined>>): string | undefined {
  if (settings['appendonly'] !== 'yes') {
    return 'Redis keeps no append-only file (appendonly is not yes): a Redis restart loses the jobs the master drives';
  }
  const fsync = settings['appendfsync'];
  if (fsync !== 'always') {
    return `Redis fsyncs its append-only file ${fsync === 'everysec' ? 'once a second' : `per "${fsync}"`}, not per write (appendfsync always): a Redis crash may lose writes it already answered`;
  }
  return undefined;
}

/**
 * At start-up, reads Redis's persistence settings and warns when they let a crash lose answered
 * writes. A server that refuses `CONFIG GET` (managed services often do) is noted, not failed.
 */
@Injectable()
export class StoreDurabilityCheck implements OnApplicationBootstrap {
  private readonly logger = new Logger('StoreDurability');

  constructor(@Inject(REDIS_CONNECTION) private readonly redis: RedisConnection) {}

  async onApplicationBootstrap(): Promise<void> {
    let settings: Record<string, string | undefined>;
    try {
      settings = (await this.redis.configGet(['appendonly', 'appendfsync'])) as Record<string, string>;
    } catch (err) {
      this.logger.log(`could not read Redis's persistence settings (${(err as Error).message}); not checked`);
      return;
    }
    const warning = durabilityWarning(settings);
    if (warning !== undefined) this.logger.warn(`${warning}; see README, "Running on many machines"`);
  }
}
