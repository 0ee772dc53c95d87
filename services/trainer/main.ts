import { redactedUrl } from '#libs/config';
import { runService } from '#libs/service-runtime';
import { TRAINER_CONFIG } from './src/trainer-config.js';
import { TrainerModule } from './src/trainer.module.js';

runService({
  role: 'trainer',
  config: TRAINER_CONFIG,
  module: (config) => TrainerModule.forRoot(config),
  readyLine: (_app, config) => `trainer ${config.id} ready (NATS ${redactedUrl(config.natsUrl)})`,
});
