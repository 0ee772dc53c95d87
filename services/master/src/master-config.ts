import { env, type EnvSpec } from '#libs/config';
import { LEASE_TTL_MS } from './leader-lease.js';
import { TASK_DURATION_WINDOW } from './task-timeout.js';

/** How often the dispatch loop scans deadlines, counts trainers and refills dispatch windows. */
export const DISPATCH_TICK_MS = 500;

/** How long a finished job's records, stream messages and checkpoints are kept: a week. */
export const JOB_RETENTION_HOURS = 168;

/** The master's own settings. */
export interface MasterConfig {
  /** Redis key prefix (`MASTER_KEY_PREFIX`), so several clusters can share one Redis. */
  keyPrefix: string;
  /** Dispatch loop period in milliseconds (`MASTER_TICK_MS`). */
  tickMs: number;
  /** Recent task durations averaged into the task timeout (`MASTER_TASK_DURATION_WINDOW`). */
  durationWindow: number;
  /**
   * Leader lease TTL in milliseconds (`MASTER_LEASE_TTL_MS`): a standby takes over at most this
   * long after the leader died; the leader renews every third of it.
   */
  leaseTtlMs: number;
  /**
   * Hours a stopped job is kept (`JOB_RETENTION_HOURS`, fractions allowed): then its Redis
   * state, jobs-bucket entry, stream messages and pserver checkpoints are removed; its output
   * directory stays.
   */
  retentionHours: number;
}

/** Environment fields of the master. */
export const MASTER_CONFIG: EnvSpec<MasterConfig> = {
  keyPrefix: ['MASTER_KEY_PREFIX', env.string({ default: 'tributary', pattern: /^[A-Za-z0-9_:-]+$/ })],
  tickMs: ['MASTER_TICK_MS', env.int({ default: DISPATCH_TICK_MS, min: 10, max: 60_000 })],
  durationWindow: ['MASTER_TASK_DURATION_WINDOW', env.int({ default: TASK_DURATION_WINDOW, min: 1, max: 10_000 })],
  leaseTtlMs: ['MASTER_LEASE_TTL_MS', env.int({ default: LEASE_TTL_MS, min: 300, max: 600_000 })],
  retentionHours: ['JOB_RETENTION_HOURS', env.number({ default: JOB_RETENTION_HOURS, min: 0, max: 100_000 })],
};
