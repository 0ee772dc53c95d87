import { Module, type DynamicModule } from '@nestjs/common';
import type { CommonConfig } from '#libs/config';
import type { TrainerConfig } from './trainer-config.js';
import { TrainerService } from './trainer.service.js';

/** Wires the trainer: one provider that runs the job loop (the logic lives in plain classes). */
@Module({})
export class TrainerModule {
  static forRoot(_config: CommonConfig & TrainerConfig & { id: string }): DynamicModule {
    return { module: TrainerModule, providers: [TrainerService] };
  }
}
