import { redactedUrl } from '#libs/config';
import { runService } from '#libs/service-runtime';
import { EVALUATOR_CONFIG } from './src/evaluator-config.js';
import { EvaluatorModule } from './src/evaluator.module.js';

runService({
  role: 'evaluator',
  config: EVALUATOR_CONFIG,
  module: (config) => EvaluatorModule.forRoot(config),
  readyLine: (_app, config) => `evaluator ${config.id} ready (NATS ${redactedUrl(config.natsUrl)})`,
});
