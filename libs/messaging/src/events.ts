/** Why a job stopped. */
export type StopReason = 'target' | 'patience' | 'maxEpochs' | 'maxSeconds' | 'manual';

/** Evaluation results of one snapshot. */
export interface EvaluationMetrics {
  loss: number;
  accuracy?: number;
}

/** Lifecycle events published on `tributary.jobs.<id>.events`. */
export type JobEvent =
  | { type: 'submitted'; jobId: string; at: string }
  | {
      type: 'started';
      jobId: string;
      at: string;
      epoch: number;
      tasksPerEpoch: number;
      records: number;
      /** The job's seed (`training.seed`, or the one the master picked); absent for jobs stored before seeds were. */
      seed?: number;
    }
  | {
      type: 'epoch';
      jobId: string;
      at: string;
      /** Epochs completed: the epoch that just closed is `epoch - 1`. */
      epoch: number;
      done: number;
      discarded: number;
      /** Times each task was counted done in the epoch that just closed, by task id. */
      doneCounts: Record<string, number>;
    }
  | { type: 'task-retried'; jobId: string; at: string; epoch: number; taskId: number; failures: number; error: string }
  | {
      type: 'task-discarded';
      jobId: string;
      at: string;
      epoch: number;
      taskId: number;
      failures: number;
      error: string;
    }
  | { type: 'waiting'; jobId: string; at: string; trainers: number; min: number }
  | {
      type: 'metrics';
      jobId: string;
      at: string;
      version: number;
      epoch: number;
      metrics: EvaluationMetrics;
      examples: number;
      best: number;
      /** Examples trained on over every trainer when the snapshot was scored, as the master counted them. */
      samples?: number;
    }
  | { type: 'stopped'; jobId: string; at: string; reason: StopReason; detail?: string }
  | { type: 'model-exported'; jobId: string; at: string; output: string; bestValue: number }
  | {
      type: 'failed';
      jobId: string;
      at: string;
      error: string;
      field?: string;
      /**
       * True on the refusal of a submission: no job was started by it, and a running job of the
       * same id goes on. Absent when the master ended an accepted job (its record says `failed`).
       */
      refused?: boolean;
    }
  | { type: 'evaluation-failed'; jobId: string; at: string; error: string; version?: number };

/** A job event without the fields `JobEventPublisher.publish` fills in. */
export type JobEventInput = JobEvent extends infer E ? (E extends JobEvent ? Omit<E, 'at'> : never) : never;

/** The state of a job as seen by workers, kept in the jobs bucket. */
export type JobState = 'running' | 'waiting' | 'stopped' | 'failed';

/** The entry of the jobs bucket (the job directory that trainers, pservers and evaluators watch). */
export interface JobRecord {
  jobId: string;
  state: JobState;
  /** The validated job spec, as JSON. */
  spec: unknown;
  epoch: number;
  startedAt: string;
  stoppedAt?: string;
  reason?: StopReason;
  /** Why the job failed (state `failed`): the cause the master's `failed` event names. */
  error?: string;
}

/** What a parameter server registers under `shard-<k>` in the pservers bucket. */
export interface PserverRegistration {
  shard: number;
  address: string;
  pid: number;
  id: string;
  startedAt: string;
}

/** What each process refreshes in the members bucket under `<role>.<id>`. */
export interface MemberStatus {
  role: 'master' | 'pserver' | 'trainer' | 'evaluator';
  id: string;
  pid: number;
  host: string;
  state: string;
  at: string;
  jobId?: string;
  taskId?: number;
  /** What a trainer or the evaluator computes with: its TensorFlow.js backend kind. */
  backend?: string;
  /**
   * Which versions of our own kernels the process runs where it has both (a pserver's optimizer
   * kernels, a trainer's gradient kernels on wasm): `wasm-simd` (the hand-written WebAssembly
   * SIMD128 ones) or `js` (plain JavaScript; see `TRIBUTARY_KERNELS`).
   */
  kernels?: string;
  samplesPerSecond?: number;
  /**
   * The CPUs the process may run on, as a Linux CPU list (`0-3,8`): one core for a trainer that
   * `tributary up` pinned (or `taskset` started); absent where the system does not say.
   */
  cpus?: string;
  /**
   * Where a step's time goes: mean milliseconds per step of each phase since the previous
   * update (trainer: `wait`, `decode`, `load`, `train`, `getUpdate`, `push`, `idle`; pserver:
   * `barrier`, `update`).
   */
  stepPhases?: Record<string, number>;
  shard?: number;
  versions?: Record<string, number>;
  leader?: boolean;
  /** Where the process serves Prometheus metrics (`http://host:port/metrics`; health beside it). */
  metricsUrl?: string;
}

/** A pserver shard retained its parameters at `version` for evaluation. */
export interface SnapshotNotice {
  jobId: string;
  shard: number;
  version: number;
  at: string;
}

/**
 * A `local` round the first of its trainers has finished: the shard's round on `version` (the
 * version its trainers computed on) waits for the others (`SUBJECTS.rounds`).
 */
export interface RoundNotice {
  jobId: string;
  shard: number;
  version: number;
}

/** A task as dispatched through the tasks stream. */
export interface TaskMessage {
  jobId: string;
  epoch: number;
  taskId: number;
  /** Changes on every dispatch; a claim or report carrying an old one is ignored. */
  dispatchId: string;
  chunks: { file: string; offset: number; numRecords: number }[];
}

/** A trainer's report on a task. */
export interface TaskReport {
  jobId: string;
  taskId: number;
  epoch: number;
  dispatchId: string;
  trainerId: string;
  outcome: 'done' | 'failed' | 'returned';
  error?: string;
  samples?: number;
}

/**
 * A trainer or the evaluator could not set a job up: its model cannot be built, its data read
 * or scored. The master counts these; enough of them fail the job.
 */
export interface JobFaultReport {
  jobId: string;
  /** The run of the job id it concerns (its `JobRecord.startedAt`): a report on an earlier run is ignored. */
  startedAt: string;
  /** Who could not: a trainer's or the evaluator's id. */
  source: string;
  error: string;
}

/** A trainer's claim of a task message it pulled (request on `tributary.jobs.<id>.tasks.claim`). */
export interface TaskClaim {
  jobId: string;
  taskId: number;
  epoch: number;
  dispatchId: string;
  trainerId: string;
}

/**
 * The master's answer to a claim: the task is the trainer's until `deadlineMs` (epoch ms, by the
 * master's clock), that is for `leaseMs` from the claim unless the trainer claims it again
 * (renews it) before; or it is refused: `stale` (re-dispatched or done), `stopped` (the job
 * stopped), `full` (enough trainers).
 */
export type TaskClaimReply =
  { ok: true; deadlineMs: number; leaseMs: number } | { ok: false; reason: 'stale' | 'stopped' | 'full' };

/** The master's answer to a `TaskReport`; `counted` is false for a report it ignored. */
export interface TaskReportReply {
  ok: boolean;
  counted: boolean;
  error?: string;
}

/** A stop request (body of `tributary.jobs.<id>.stop`). */
export interface StopRequest {
  reason: StopReason;
  detail?: string;
}

/** Task counters of a job's current epoch. */
export interface TaskCounts {
  total: number;
  todo: number;
  pending: number;
  done: number;
  discarded: number;
}

/** Accounting of one epoch in a status reply. */
export interface EpochAccounting {
  epoch: number;
  done: number;
  discarded: number;
  /** Times each task was counted done in the epoch, by task id. */
  doneCounts: Record<string, number>;
}

/** The reply to a request on `tributary.jobs.<id>.status` for a known job. */
export interface JobStatusReply {
  jobId: string;
  state: JobState;
  reason?: StopReason;
  /** What the stop request said (or what was wrong with its body). */
  detail?: string;
  epoch: number;
  tasks: TaskCounts;
  trainers: number;
  startedAt: string;
  stoppedAt?: string;
  /** Recent epochs, oldest first: the current one, then the next once its tasks started to go out. */
  epochs: EpochAccounting[];
  samples: number;
  /** The job's seed (`training.seed`, or the one the master picked at submission). */
  seed?: number;
  lastMetrics?: EvaluationMetrics;
}

/** One job in the reply to `tributary.jobs.list`. */
export interface JobListEntry {
  jobId: string;
  state: JobState;
  reason?: StopReason;
  epoch: number;
  /** The metric the job's stop policy watches (`evaluation.metric`). */
  metric: 'accuracy' | 'loss';
  /** The metric of the last evaluation the master heard of, if any. */
  lastValue?: number;
  /** The best value of the metric so far, as the evaluator last published it. */
  best?: number;
  trainers: number;
  startedAt: string;
  stoppedAt?: string;
  /** The job's output directory (`output`). */
  output: string;
}

/** The reply to a request on `tributary.jobs.list`: running jobs first, then by start time. */
export interface JobListReply {
  jobs: JobListEntry[];
}

/** The `summary.json` the evaluator writes beside the final model in the job's output directory. */
export interface JobSummary {
  jobId: string;
  /** When the job started (its `JobRecord.startedAt`), telling runs of a reused job id apart. */
  startedAt: string;
  stopReason: StopReason;
  metric: 'accuracy' | 'loss';
  /** Best value of the metric; null when no evaluation gave a number. */
  bestValue: number | null;
  /** Model version (pserver step) of the exported parameters. */
  bestVersion: number;
  /** Completed passes over the training data. */
  epochs: number;
  /** Model versions (optimizer steps) the job reached. */
  steps: number;
  wallSeconds: number;
  /** Examples trained on, over every trainer. */
  samples: number;
  samplesPerSecond: number;
}
