import { Module, type DynamicModule } from '@nestjs/common';
import type { CommonConfig } from '#libs/config';
import type { EvaluatorConfig } from './evaluator-config.js';

/** Wires the evaluator. */
@Module({})
export class EvaluatorModule {
  static forRoot(_config: CommonConfig & EvaluatorConfig & { id: string }): DynamicModule {
    return { module: EvaluatorModule, providers: [] };
  }
}
