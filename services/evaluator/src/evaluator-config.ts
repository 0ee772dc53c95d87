import { env, type EnvSpec } from '#libs/config';

/** The evaluator's own settings. */
export interface EvaluatorConfig {
  /** TF.js backend to force (`TRIBUTARY_BACKEND`); by default the fastest present is chosen. */
  backend: 'auto' | 'tensorflow' | 'wasm' | 'cpu';
}

/** Environment fields of the evaluator. */
export const EVALUATOR_CONFIG: EnvSpec<EvaluatorConfig> = {
  backend: ['TRIBUTARY_BACKEND', env.oneOf(['auto', 'tensorflow', 'wasm', 'cpu'] as const, { default: 'auto' })],
};
