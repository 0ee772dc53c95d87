import type { NatsConnection } from '@nats-io/transport-node';
import { encodeJson } from './json-codec.js';
import { SUBJECTS } from './subjects.js';

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
  | { type: 'started'; jobId: string; at: string; epoch: number; tasksPerEpoch: number; records: number }
  | { type: 'epoch'; jobId: string; at: string; epoch: number; done: number; discarded: number }
  | { type: 'task-retried'; jobId: string; at: string; epoch: number; taskId: number; failures: number; error: string }
  | { type: 'task-discarded'; jobId: string; at: string; epoch: number; taskId: number; failures: number; error: string }
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
    }
  | { type: 'stopped'; jobId: string; at: string; reason: StopReason; detail?: string }
  | { type: 'model-exported'; jobId: string; at: string; output: string; bestValue: number }
  | { type: 'failed'; jobId: string; at: string; error: string; field?: string };

/** A job event without the fields `publishEvent` fills in. */
export type JobEventInput = JobEvent extends infer E ? (E extends JobEvent ? Omit<E, 'at'> : never) : never;

/** Publishes an event on the job's events subject (captured by the events stream). */
export function publishEvent(nc: NatsConnection, event: JobEventInput): void {
  nc.publish(SUBJECTS.events(event.jobId), encodeJson({ ...event, at: new Date().toISOString() }));
}

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
  backend?: string;
  samplesPerSecond?: number;
  shard?: number;
  versions?: Record<string, number>;
  leader?: boolean;
}

/** A pserver shard retained its parameters at `version` for evaluation. */
export interface SnapshotNotice {
  jobId: string;
  shard: number;
  version: number;
  at: string;
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
