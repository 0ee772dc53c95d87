import { runService } from '#libs/service-runtime';
import { PSERVER_CONFIG } from './src/pserver-config.js';
import { PserverModule, PserverService } from './src/pserver.module.js';

runService({
  role: 'pserver',
  config: PSERVER_CONFIG,
  module: (config) => PserverModule.forRoot(config),
  readyLine: (app, config) => `pserver shard ${config.shard} ready on ${app.get(PserverService).address}`,
});
