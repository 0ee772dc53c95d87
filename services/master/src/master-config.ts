import { env, type EnvSpec } from '#libs/config';

/** The master's own settings. */
export interface MasterConfig {
  /** Redis key prefix (`MASTER_KEY_PREFIX`), so several clusters can share one Redis. */
  keyPrefix: string;
}

/** Environment fields of the master. */
export const MASTER_CONFIG: EnvSpec<MasterConfig> = {
  keyPrefix: ['MASTER_KEY_PREFIX', env.string({ default: 'tributary', pattern: /^[A-Za-z0-9_:-]+$/ })],
};
