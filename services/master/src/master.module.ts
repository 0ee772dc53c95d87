import { Module, type DynamicModule } from '@nestjs/common';
import type { CommonConfig } from '#libs/config';
import type { MasterConfig } from './master-config.js';

/** Wires the master: job intake, task dispatch, status and stop handling. */
@Module({})
export class MasterModule {
  static forRoot(_config: CommonConfig & MasterConfig & { id: string }): DynamicModule {
    return { module: MasterModule, providers: [] };
  }
}
