import {
  PATH_ROOTS_CONFIG,
  PSERVER_TLS_CONFIG,
  env,
  type EnvSpec,
  type PathRootsConfig,
  type PserverTlsConfig,
} from '#libs/config';
import { BACKEND_CHOICES, type BackendChoice } from '#libs/learner';
import { KERNEL_CHOICES, KERNELS_ENV_VAR, type KernelChoice } from '#libs/wasm-simd';
import {
  CHUNK_CACHE_BYTES,
  CLAIM_AHEAD_MS,
  IDLE_TASK_WAIT_MS,
  PROGRESS_LOG_INTERVAL_MS,
  PSERVER_OUTAGE_BUDGET_MS,
  QUORUM_HEARTBEAT_MS,
} from './defaults.js';
import type { LearnerThreadChoice } from './learner-thread.js';

/** The trainer's own settings. */
export interface TrainerConfig extends PserverTlsConfig, Pick<PathRootsConfig, 'dataRoots'> {
  /** TF.js backend to force (`TRIBUTARY_BACKEND`); by default the fastest present is chosen. */
  backend: 'auto' | BackendChoice;
  /** How long to wait for a task before leaving the sync quorum as idle (`TRAINER_IDLE_WAIT_MS`). */
  idleTaskWaitMs: number;
  /**
   * How long before the task in hand is expected to end the next one is claimed and its first
   * chunk read (`TRAINER_CLAIM_AHEAD_MS`); 0 claims it during the last minibatch only.
   */
  claimAheadMs: number;
  /** How often a progress line is logged while training (`TRAINER_PROGRESS_INTERVAL_MS`). */
  progressLogIntervalMs: number;
  /**
   * How long the parameter servers may stay unreachable before the task in hand is reported
   * failed (`TRAINER_PSERVER_OUTAGE_BUDGET_MS`).
   */
  pserverOutageBudgetMs: number;
  /**
   * How often a trainer holding a task joins the sync quorum again as a sign of life
   * (`TRAINER_QUORUM_HEARTBEAT_MS`); keep it well under the pservers' `PSERVER_MEMBER_TTL_MS`.
   */
  quorumHeartbeatMs: number;
  /**
   * Our gradient kernels on the wasm backend (`TRIBUTARY_KERNELS`): `js` runs their plain
   * JavaScript versions; `auto` and `wasm-simd` run SIMD128 where the runtime has it. Read
   * here so that a wrong value stops the trainer at start-up.
   */
  kernels: KernelChoice;
  /**
   * Whether a job's learner trains on a thread of its own, so the event loop keeps serving the
   * network meanwhile (`TRAINER_LEARNER_THREAD`): `auto`, the default, for jobs whose pushes
   * overlap training (`async` with `overlapPushes`) unless a native TF.js package is installed;
   * `on` for every job; `off` for none (see `usesLearnerThread`).
   */
  learnerThread: LearnerThreadChoice;
  /**
   * Mebibytes a job's chunks are kept in, read and checked, for the epochs after the one that
   * read them (`TRAINER_CHUNK_CACHE_MB`); 0 reads every chunk from the disk each time.
   */
  chunkCacheMb: number;
}

/** Environment fields of the trainer. */
export const TRAINER_CONFIG: EnvSpec<TrainerConfig> = {
  backend: ['TRIBUTARY_BACKEND', env.oneOf(['auto', ...BACKEND_CHOICES] as const, { default: 'auto' })],
  idleTaskWaitMs: ['TRAINER_IDLE_WAIT_MS', env.int({ default: IDLE_TASK_WAIT_MS, min: 100, max: 60_000 })],
  claimAheadMs: ['TRAINER_CLAIM_AHEAD_MS', env.int({ default: CLAIM_AHEAD_MS, min: 0, max: 600_000 })],
  progressLogIntervalMs: [
    'TRAINER_PROGRESS_INTERVAL_MS',
    env.int({ default: PROGRESS_LOG_INTERVAL_MS, min: 1_000, max: 3_600_000 }),
  ],
  pserverOutageBudgetMs: [
    'TRAINER_PSERVER_OUTAGE_BUDGET_MS',
    env.int({ default: PSERVER_OUTAGE_BUDGET_MS, min: 0, max: 3_600_000 }),
  ],
  kernels: [KERNELS_ENV_VAR, env.oneOf(KERNEL_CHOICES, { default: 'auto' })],
  learnerThread: ['TRAINER_LEARNER_THREAD', env.oneOf(['auto', 'on', 'off'] as const, { default: 'auto' })],
  chunkCacheMb: [
    'TRAINER_CHUNK_CACHE_MB',
    env.int({ default: CHUNK_CACHE_BYTES / (1024 * 1024), min: 0, max: 1024 * 1024 }),
  ],
  quorumHeartbeatMs: ['TRAINER_QUORUM_HEARTBEAT_MS', env.int({ default: QUORUM_HEARTBEAT_MS, min: 100, max: 600_000 })],
  ...PSERVER_TLS_CONFIG,
  dataRoots: PATH_ROOTS_CONFIG.dataRoots,
};
