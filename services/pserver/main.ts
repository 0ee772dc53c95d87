import { runService } from '#libs/service-runtime';
import { PSERVER_CONFIG } from './src/pserver-config.js';
import { PserverModule, PserverService } from './src/pserver.module.js';

runService({
  role: 'pserver',
  config: PSERVER_CONFIG,
  module: (config) => PserverModule.forRoot(config),
  readyLine: (app, config) => {
    const { address } = app.get(PserverService);
    // A standby told to stop before it served says so, and not that it is ready.
    return address
      ? `pserver shard ${config.shard} ready on ${address}`
      : `pserver shard ${config.shard} stopped while standing by`;
  },
});
