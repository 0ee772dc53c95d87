import {
  PATH_ROOTS_CONFIG,
  PSERVER_TLS_CONFIG,
  env,
  type EnvSpec,
  type PathRootsConfig,
  type PserverTlsConfig,
} from '#libs/config';
import { BACKEND_CHOICES, type BackendChoice } from '#libs/learner';
import { EVALUATOR_NICENESS, STATUS_TIMEOUT_MS } from './defaults.js';

/** The evaluator's own settings. */
export interface EvaluatorConfig extends PserverTlsConfig, PathRootsConfig {
  /** TF.js backend to force (`TRIBUTARY_BACKEND`); by default the fastest present is chosen. */
  backend: 'auto' | BackendChoice;
  /** How long the status request for a job summary waits for the master (`EVALUATOR_STATUS_TIMEOUT_MS`). */
  statusTimeoutMs: number;
  /**
   * Scheduling niceness the evaluator runs at (`EVALUATOR_NICENESS`, 0 to 19): above 0 it yields
   * the CPU to trainers on a shared machine, and scores the newest snapshot when it gets to it.
   */
  niceness: number;
}

/** Environment fields of the evaluator. */
export const EVALUATOR_CONFIG: EnvSpec<EvaluatorConfig> = {
  backend: ['TRIBUTARY_BACKEND', env.oneOf(['auto', ...BACKEND_CHOICES] as const, { default: 'auto' })],
  statusTimeoutMs: ['EVALUATOR_STATUS_TIMEOUT_MS', env.int({ default: STATUS_TIMEOUT_MS, min: 100, max: 120_000 })],
  niceness: ['EVALUATOR_NICENESS', env.int({ default: EVALUATOR_NICENESS, min: 0, max: 19 })],
  ...PSERVER_TLS_CONFIG,
  ...PATH_ROOTS_CONFIG,
};
