import {
  JOB_ID_PATTERN,
  MalformedMessageError,
  decodeJsonObject,
  numberField,
  stringField,
  type JobFaultReport,
  type TaskClaim,
  type TaskReport,
} from '#libs/messaging';

const OUTCOMES = new Set<TaskReport['outcome']>(['done', 'failed', 'returned']);

/**
 * The job id of a per-job subject `tributary.jobs.<id>.<...>`.
 * @throws MalformedMessageError when the id token is not a valid job id.
 */
export function jobIdFromSubject(subject: string): string {
  const jobId = subject.split('.')[2] ?? '';
  if (!JOB_ID_PATTERN.test(jobId))
    throw new MalformedMessageError(subject, `invalid job id ${JSON.stringify(jobId)} in subject`);
  return jobId;
}

function count(subject: string, obj: Record<string, unknown>, field: string): number {
  const v = numberField(subject, obj, field);
  if (!Number.isInteger(v) || v < 0) throw new MalformedMessageError(subject, `${field}: expected an integer >= 0`);
  return v;
}

function taskRef(subject: string, data: Uint8Array): { obj: Record<string, unknown>; ref: TaskClaim } {
  const obj = decodeJsonObject(subject, data);
  const jobId = stringField(subject, obj, 'jobId');
  if (jobId !== jobIdFromSubject(subject))
    throw new MalformedMessageError(subject, `jobId ${JSON.stringify(jobId)} does not match the subject`);
  return {
    obj,
    ref: {
      jobId,
      taskId: count(subject, obj, 'taskId'),
      epoch: count(subject, obj, 'epoch'),
      dispatchId: stringField(subject, obj, 'dispatchId'),
      trainerId: stringField(subject, obj, 'trainerId'),
    },
  };
}

/**
 * Decodes a claim request (`TaskClaim`) received on `subject`.
 * @throws MalformedMessageError naming the subject and the bad field.
 */
export function parseTaskClaim(subject: string, data: Uint8Array): TaskClaim {
  return taskRef(subject, data).ref;
}

/**
 * Decodes a report request (`TaskReport`) received on `subject`.
 * @throws MalformedMessageError naming the subject and the bad field.
 */
export function parseTaskReport(subject: string, data: Uint8Array): TaskReport {
  const { obj, ref } = taskRef(subject, data);
  const outcome = obj['outcome'];
  if (typeof outcome !== 'string' || !OUTCOMES.has(outcome as TaskReport['outcome'])) {
    throw new MalformedMessageError(subject, 'outcome: expected done, failed or returned');
  }
  const report: TaskReport = { ...ref, outcome: outcome as TaskReport['outcome'] };
  if (obj['error'] !== undefined) {
    if (typeof obj['error'] !== 'string') throw new MalformedMessageError(subject, 'error: expected a string');
    report.error = obj['error'];
  }
  if (obj['samples'] !== undefined) {
    const samples = numberField(subject, obj, 'samples');
    if (samples < 0) throw new MalformedMessageError(subject, 'samples: expected a number >= 0');
    report.samples = samples;
  }
  return report;
}

/**
 * Decodes a fault report (`JobFaultReport`) received on `subject`.
 * @throws MalformedMessageError naming the subject and the bad field.
 */
export function parseJobFault(subject: string, data: Uint8Array): JobFaultReport {
  const obj = decodeJsonObject(subject, data);
  const jobId = stringField(subject, obj, 'jobId');
  if (jobId !== jobIdFromSubject(subject))
    throw new MalformedMessageError(subject, `jobId ${JSON.stringify(jobId)} does not match the subject`);
  return {
    jobId,
    startedAt: stringField(subject, obj, 'startedAt'),
    source: stringField(subject, obj, 'source'),
    error: stringField(subject, obj, 'error'),
  };
}
