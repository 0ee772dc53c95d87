import { runService } from '#libs/service-runtime';
import { MASTER_CONFIG } from './src/master-config.js';
import { MasterModule } from './src/master.module.js';

runService({
  role: 'master',
  config: MASTER_CONFIG,
  module: (config) => MasterModule.forRoot(config),
  readyLine: (_app, config) => `master ${config.id} ready (NATS ${config.natsUrl}, Redis ${config.redisUrl})`,
});
