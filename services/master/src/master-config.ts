import { PATH_ROOTS_CONFIG, env, type EnvSpec, type PathRootsConfig } from '#libs/config';
import { totalmem } from 'node:os';
import { LEASE_TTL_MS } from './leader-lease.js';
import { MAX_JOB_FAULTS } from './task-queue.js';
import { CLAIM_LEASE_MS, TASK_DURATION_WINDOW } from './task-timeout.js';

/** How often the dispatch loop scans deadlines, counts trainers and refills dispatch windows. */
export const DISPATCH_TICK_MS = 500;

/** How long a finished job's records, stream messages and checkpoints are kept: a week. */
export const JOB_RETENTION_HOURS = 168;
/**
 * Default of `MAX_JOB_PARAMETERS`: a parameter takes 4 bytes in each of the several copies a
 * job keeps on one machine (trainer model and gradients, pserver shard, optimizer slots,
 * snapshots), so a model of up to a 64th of the memory in parameters fits with room to spare.
 */
export const DEFAULT_MAX_JOB_PARAMETERS = Math.max(1_000_000, Math.floor(totalmem() / 64));

/** Default of `MAX_JOB_SPEC_BYTES`: 1 MiB (a model topology included). */
export const DEFAULT_MAX_JOB_SPEC_BYTES = 1 << 20;

/** Default of `MAX_RUNNING_JOBS`. */
export const DEFAULT_MAX_RUNNING_JOBS = 16;

/** The master's own settings. */
export interface MasterConfig extends PathRootsConfig {
  /** Redis key prefix (`MASTER_KEY_PREFIX`), so several clusters can share one Redis. */
  keyPrefix: string;
  /** Dispatch loop period in milliseconds (`MASTER_TICK_MS`). */
  tickMs: number;
  /** Recent task durations averaged into the task timeout (`MASTER_TASK_DURATION_WINDOW`). */
  durationWindow: number;
  /**
   * How long a trainer's claim on a task holds unless renewed (`MASTER_CLAIM_LEASE_MS`): a dead
   * trainer's tasks go back this long after its last renewal (or after the task timeout, when
   * shorter); a live trainer renews every third of it.
   */
  claimLeaseMs: number;
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
  /** Most trainable parameters of a job's model (`MAX_JOB_PARAMETERS`); a bigger one is refused. */
  maxJobParameters: number;
  /** Most bytes of a submitted spec (`MAX_JOB_SPEC_BYTES`); a bigger one is refused. */
  maxJobSpecBytes: number;
  /** Most jobs running at once (`MAX_RUNNING_JOBS`); a submission beyond is refused. */
  maxRunningJobs: number;
  /**
   * Failed attempts to set a job up (reported by trainers and the evaluator) after which the
   * job fails (`MAX_JOB_FAULTS`).
   */
  maxJobFaults: number;
}

/** Environment fields of the master. */
export const MASTER_CONFIG: EnvSpec<MasterConfig> = {
  keyPrefix: ['MASTER_KEY_PREFIX', env.string({ default: 'tributary', pattern: /^[A-Za-z0-9_:-]+$/ })],
  tickMs: ['MASTER_TICK_MS', env.int({ default: DISPATCH_TICK_MS, min: 10, max: 60_000 })],
  durationWindow: ['MASTER_TASK_DURATION_WINDOW', env.int({ default: TASK_DURATION_WINDOW, min: 1, max: 10_000 })],
  claimLeaseMs: ['MASTER_CLAIM_LEASE_MS', env.int({ default: CLAIM_LEASE_MS, min: 3_000, max: 3_600_000 })],
  leaseTtlMs: ['MASTER_LEASE_TTL_MS', env.int({ default: LEASE_TTL_MS, min: 300, max: 600_000 })],
  retentionHours: ['JOB_RETENTION_HOURS', env.number({ default: JOB_RETENTION_HOURS, min: 0, max: 100_000 })],
  maxJobParameters: [
    'MAX_JOB_PARAMETERS',
    env.int({ default: DEFAULT_MAX_JOB_PARAMETERS, min: 1, max: Number.MAX_SAFE_INTEGER }),
  ],
  maxJobSpecBytes: ['MAX_JOB_SPEC_BYTES', env.int({ default: DEFAULT_MAX_JOB_SPEC_BYTES, min: 1024, max: 64 << 20 })],
  maxRunningJobs: ['MAX_RUNNING_JOBS', env.int({ default: DEFAULT_MAX_RUNNING_JOBS, min: 1, max: 10_000 })],
  maxJobFaults: ['MAX_JOB_FAULTS', env.int({ default: MAX_JOB_FAULTS, min: 1, max: 1000 })],
  ...PATH_ROOTS_CONFIG,
};
