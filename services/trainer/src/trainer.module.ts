import { Module, type DynamicModule } from '@nestjs/common';
import type { CommonConfig } from '#libs/config';
import type { TrainerConfig } from './trainer-config.js';

/** Wires the trainer. */
@Module({})
export class TrainerModule {
  static forRoot(_config: CommonConfig & TrainerConfig & { id: string }): DynamicModule {
    return { module: TrainerModule, providers: [] };
  }
}
