/**
 * NATS subjects, streams and buckets of Tributary. Every subject a user may touch is plain
 * NATS, so the `nats` CLI works with no plugin.
 */

/** Job ids are used inside subjects and keys, so they are restricted to this alphabet. */
export const JOB_ID_PATTERN = /^[a-z0-9][a-z0-9_-]{0,62}$/;

/** Subjects, by purpose. Functions take a job id. */
export const SUBJECTS = {
  /** Publish a job spec (JSON). Captured by the jobs stream. */
  submit: 'tributary.jobs.submit',
  /** Request/reply: every job the master knows (JSON `JobListReply`); body `{all?: boolean}`. */
  list: 'tributary.jobs.list',
  /** Lifecycle events of a job (JSON `JobEvent`). Captured by the events stream. */
  events: (jobId: string) => `tributary.jobs.${jobId}.events`,
  /** Wildcard over every job's events. */
  allEvents: 'tributary.jobs.*.events',
  /** Request/reply: the job's state and counters. */
  status: (jobId: string) => `tributary.jobs.${jobId}.status`,
  allStatus: 'tributary.jobs.*.status',
  /** Publish to stop a job (optionally JSON `{reason}`). Captured by the control stream. */
  stop: (jobId: string) => `tributary.jobs.${jobId}.stop`,
  allStop: 'tributary.jobs.*.stop',
  /** Parameter snapshots ready for evaluation (JSON `SnapshotNotice`). */
  snapshots: (jobId: string) => `tributary.jobs.${jobId}.snapshots`,
  allSnapshots: 'tributary.jobs.*.snapshots',
  /**
   * A synchronous `local` round that its first trainer has finished (JSON `RoundNotice`), with
   * `training.roundEnd: first`: the job's other trainers push after the step they are on. Plain
   * NATS, not kept.
   */
  rounds: (jobId: string) => `tributary.jobs.${jobId}.rounds`,
  allRounds: 'tributary.jobs.*.rounds',
  /** Work queue of dispatched tasks of one job. */
  tasks: (jobId: string) => `tributary.tasks.${jobId}`,
  allTasks: 'tributary.tasks.>',
  /** Request/reply: a trainer claims a task message it pulled. */
  taskClaim: (jobId: string) => `tributary.jobs.${jobId}.tasks.claim`,
  allTaskClaims: 'tributary.jobs.*.tasks.claim',
  /** Request/reply: a trainer reports a task done, failed or handed back. */
  taskReport: (jobId: string) => `tributary.jobs.${jobId}.tasks.report`,
  allTaskReports: 'tributary.jobs.*.tasks.report',
  /** Request/reply: a trainer or the evaluator could not set a job up (JSON `JobFaultReport`). */
  jobFault: (jobId: string) => `tributary.jobs.${jobId}.faults`,
  allJobFaults: 'tributary.jobs.*.faults',
} as const;

/** JetStream streams and their subjects. */
export const STREAMS = {
  /** Job specs; a work queue so each spec is taken once, kept while no master runs. */
  jobs: { name: 'TRIBUTARY_JOBS', subjects: [SUBJECTS.submit] },
  /** Stop requests, kept until the master takes them. */
  control: { name: 'TRIBUTARY_CONTROL', subjects: [SUBJECTS.allStop] },
  /** Dispatched tasks, one subject per job. */
  tasks: { name: 'TRIBUTARY_TASKS', subjects: [SUBJECTS.allTasks] },
  /** Events of every job, kept for a week so late watchers can replay them. */
  events: { name: 'TRIBUTARY_EVENTS', subjects: [SUBJECTS.allEvents] },
  /** Snapshot notices, so a restarted evaluator resumes. */
  snapshots: { name: 'TRIBUTARY_SNAPSHOTS', subjects: [SUBJECTS.allSnapshots] },
} as const;

/** Durable consumer names. */
export const CONSUMERS = {
  master: 'master',
  masterControl: 'master-control',
  /** Trainers of one job share this pull consumer. */
  trainers: (jobId: string) => `trainers-${jobId}`,
  evaluator: (jobId: string) => `evaluator-${jobId}`,
} as const;

/** NATS KV buckets. */
export const KV_BUCKETS = {
  /** `shard-<k>` → `PserverRegistration`. */
  pservers: 'tributary-pservers',
  /** `<jobId>` → `JobRecord`: the directory of jobs that workers watch. */
  jobs: 'tributary-jobs',
  /** `<role>.<id>` → `MemberStatus`, refreshed by each process; entries lapse after the TTL. */
  members: 'tributary-members',
} as const;
