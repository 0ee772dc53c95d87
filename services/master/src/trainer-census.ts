import { Inject, Injectable, Logger } from '@nestjs/common';
import type { Buckets } from '#libs/messaging';
import { BUCKETS } from '#libs/service-runtime';

/**
 * Counts live trainers: the `trainer.*` entries of the members bucket, which lapse by
 * themselves when a trainer stops refreshing them.
 */
@Injectable()
export class TrainerCensus {
  private readonly logger = new Logger('TrainerCensus');
  private live = 0;

  constructor(@Inject(BUCKETS) private readonly buckets: Buckets) {}

  /** The count from the last refresh. */
  count(): number {
    return this.live;
  }

  /** Recounts; on a failure the previous count stands. */
  async refresh(): Promise<number> {
    try {
      let n = 0;
      for await (const _key of await this.buckets.members.keys('trainer.*')) n += 1;
      this.live = n;
    } catch (err) {
      this.logger.warn(`counting trainers failed: ${(err as Error).message}`);
    }
    return this.live;
  }
}
