import { runService } from '#libs/service-runtime';
import { redactRedisUrl } from '#libs/messaging';
import { MASTER_CONFIG } from './src/master-config.js';
import { MasterModule } from './src/master.module.js';
import { MasterOffice } from './src/master-office.js';

runService({
  role: 'master',
  config: MASTER_CONFIG,
  module: (config) => MasterModule.forRoot(config),
  readyLine: (app, config) =>
    `master ${config.id} ready as ${app.get(MasterOffice).role} (NATS ${config.natsUrl}, Redis ${redactRedisUrl(config.redisUrl)})`,
});
