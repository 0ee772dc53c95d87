import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { NATS_DEPLOYMENT_CONFIG_PATH, natsDeploymentConfig } from './nats-server-config.js';

test('nats-server config - the shipped secure.conf is what the role permissions generate', () => {
  const shipped = readFileSync(join(process.cwd(), NATS_DEPLOYMENT_CONFIG_PATH), 'utf8');
  // To refresh it after changing the permissions: `npm run build` then
  // node -e "import('./dist/libs/local-cluster/src/index.js').then((m) => process.stdout.write(m.natsDeploymentConfig()))" > deploy/nats/secure.conf
  expect(shipped).toBe(natsDeploymentConfig());
});
