/**
 * `#libs/master-client`: a typed client of the Tributary master over NATS. Trainers pull, claim
 * and report tasks with it; the CLI and tools ask status, stop and submit jobs, and watch the
 * jobs directory.
 */
export { MasterClient } from './master-client.js';
export {
  CLAIM_RETRY_BUDGET_MS,
  MASTER_REQUEST_TIMEOUT_MS,
  MIN_PULL_EXPIRES_MS,
  NEXT_TASK_TIMEOUT_MS,
  RETRY_INITIAL_BACKOFF_MS,
  RETRY_MAX_BACKOFF_MS,
} from './defaults.js';
export { InvalidJobIdError, JobUnknownToMasterError, MasterUnavailableError, RequestAbortedError } from './errors.js';
export { parseTaskMessage } from './task-message.js';
export { parseJobRecord } from './job-watch.js';
export { requestUntilReply } from './request-retry.js';

export type {
  ClaimRenewal,
  ClaimedTask,
  EventSubscription,
  MasterClientOptions,
  NextTaskOptions,
  ReportOptions,
  TaskPull,
} from './master-client.js';
export type { JobChange, JobWatch } from './job-watch.js';
export type { RetryOptions } from './request-retry.js';
