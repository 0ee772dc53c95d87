import type { EvaluationMetrics, JobListEntry, JobRecord, JobState, JobStatusReply } from '#libs/messaging';
import type { JobSpec } from '#libs/job-spec';
import type { TaskQueue } from './task-queue.js';

/** What a job's status and directory entry are built from. */
export interface JobView {
  spec: JobSpec;
  queue: TaskQueue;
  /** Fewer live trainers than `trainers.min`: the job does not dispatch. */
  waiting: boolean;
  trainers: number;
  lastMetrics?: EvaluationMetrics;
  /** The best value of the job's metric, as the evaluator last published it. */
  best?: number;
}

/** The job's state as workers and users see it. */
export function jobState(view: Pick<JobView, 'queue' | 'waiting'>): JobState {
  if (view.queue.state !== 'running') return view.queue.state;
  return view.waiting ? 'waiting' : 'running';
}

/** The reply to `tributary.jobs.<id>.status`. */
export function jobStatus(view: JobView): JobStatusReply {
  const q = view.queue;
  const reply: JobStatusReply = {
    jobId: q.jobId,
    state: jobState(view),
    epoch: q.epoch,
    tasks: q.counts(),
    trainers: view.trainers,
    startedAt: new Date(q.startedAt).toISOString(),
    epochs: q.accounting(),
    samples: q.samples,
  };
  if (view.spec.training.seed !== undefined) reply.seed = view.spec.training.seed;
  if (q.reason !== undefined) reply.reason = q.reason;
  if (q.detail !== undefined) reply.detail = q.detail;
  if (q.stoppedAt !== undefined) reply.stoppedAt = new Date(q.stoppedAt).toISOString();
  if (view.lastMetrics !== undefined) reply.lastMetrics = view.lastMetrics;
  return reply;
}

/** The job's entry in the `tributary-jobs` bucket. */
export function jobRecord(view: Pick<JobView, 'spec' | 'queue' | 'waiting'>): JobRecord {
  const q = view.queue;
  const record: JobRecord = {
    jobId: q.jobId,
    state: jobState(view),
    spec: view.spec,
    epoch: q.epoch,
    startedAt: new Date(q.startedAt).toISOString(),
  };
  if (q.stoppedAt !== undefined) record.stoppedAt = new Date(q.stoppedAt).toISOString();
  if (q.reason !== undefined) record.reason = q.reason;
  if (q.state === 'failed' && q.detail !== undefined) record.error = q.detail;
  return record;
}

/** The job's line in the reply to `tributary.jobs.list`. */
export function jobListEntry(view: JobView): JobListEntry {
  const q = view.queue;
  const metric = view.spec.evaluation.metric;
  const entry: JobListEntry = {
    jobId: q.jobId,
    state: jobState(view),
    epoch: q.epoch,
    metric,
    trainers: view.trainers,
    startedAt: new Date(q.startedAt).toISOString(),
    output: view.spec.output,
  };
  if (q.reason !== undefined) entry.reason = q.reason;
  if (q.stoppedAt !== undefined) entry.stoppedAt = new Date(q.stoppedAt).toISOString();
  const last = view.lastMetrics?.[metric];
  if (typeof last === 'number' && Number.isFinite(last)) entry.lastValue = last;
  if (view.best !== undefined && Number.isFinite(view.best)) entry.best = view.best;
  return entry;
}
