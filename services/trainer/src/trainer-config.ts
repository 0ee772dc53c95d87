import { env, type EnvSpec } from '#libs/config';

/** The trainer's own settings. */
export interface TrainerConfig {
  /** TF.js backend to force (`TRIBUTARY_BACKEND`); by default the fastest present is chosen. */
  backend: 'auto' | 'tensorflow' | 'wasm' | 'cpu';
}

/** Environment fields of the trainer. */
export const TRAINER_CONFIG: EnvSpec<TrainerConfig> = {
  backend: ['TRIBUTARY_BACKEND', env.oneOf(['auto', 'tensorflow', 'wasm', 'cpu'] as const, { default: 'auto' })],
};
