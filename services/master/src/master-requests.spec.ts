import { MalformedMessageError, encodeJson } from '#libs/messaging';
import { parseStopRequest } from './stop-request.js';
import { jobIdFromSubject, parseJobFault, parseTaskClaim, parseTaskReport } from './trainer-requests.js';

const text = (s: string) => new TextEncoder().encode(s);
const CLAIM = { jobId: 'job-a', taskId: 3, epoch: 1, dispatchId: 'r.7', trainerId: 't1' };

describe('master requests', () => {
  test('master requests - a job id is read from its subject and checked', () => {
    expect(jobIdFromSubject('tributary.jobs.job-a.status')).toBe('job-a');
    expect(() => jobIdFromSubject('tributary.jobs.Bad!.status')).toThrow(
      'malformed message on tributary.jobs.Bad!.status',
    );
  });

  test('master requests - a claim and a report decode with every field checked', () => {
    const subject = 'tributary.jobs.job-a.tasks.claim';
    expect(parseTaskClaim(subject, encodeJson(CLAIM))).toEqual(CLAIM);
    expect(() => parseTaskClaim(subject, text('{nope'))).toThrow(MalformedMessageError);
    expect(() => parseTaskClaim(subject, encodeJson({ ...CLAIM, taskId: -1 }))).toThrow(
      'taskId: expected an integer >= 0',
    );
    expect(() => parseTaskClaim(subject, encodeJson({ ...CLAIM, jobId: 'job-b' }))).toThrow(
      'does not match the subject',
    );
    const reportSubject = 'tributary.jobs.job-a.tasks.report';
    expect(parseTaskReport(reportSubject, encodeJson({ ...CLAIM, outcome: 'done', samples: 64 }))).toEqual({
      ...CLAIM,
      outcome: 'done',
      samples: 64,
    });
    expect(() => parseTaskReport(reportSubject, encodeJson({ ...CLAIM, outcome: 'maybe' }))).toThrow(
      'outcome: expected',
    );
    expect(() => parseTaskReport(reportSubject, encodeJson({ ...CLAIM, outcome: 'failed', error: 3 }))).toThrow(
      'error: expected a string',
    );
  });

  test('master requests - a fault report decodes with every field checked', () => {
    const subject = 'tributary.jobs.job-a.faults';
    const fault = { jobId: 'job-a', startedAt: '2026-01-01T00:00:00.000Z', source: 't1', error: 'no model' };
    expect(parseJobFault(subject, encodeJson(fault))).toEqual(fault);
    expect(() => parseJobFault(subject, encodeJson({ ...fault, error: 3 }))).toThrow(MalformedMessageError);
    expect(() => parseJobFault(subject, encodeJson({ ...fault, jobId: 'job-b' }))).toThrow(
      'does not match the subject',
    );
  });

  test('master requests - any stop body stops the job, with a reason when it names one', () => {
    expect(parseStopRequest(text(''))).toEqual({ reason: 'manual' });
    expect(parseStopRequest(encodeJson({ reason: 'target', detail: 'accuracy 0.9' }))).toEqual({
      reason: 'target',
      detail: 'accuracy 0.9',
    });
    expect(parseStopRequest(text('please stop'))).toEqual({
      reason: 'manual',
      detail: 'stop body was not JSON: "please stop"',
    });
    expect(parseStopRequest(text('[1]'))).toEqual({
      reason: 'manual',
      detail: 'stop body was not a JSON object: "[1]"',
    });
    expect(parseStopRequest(encodeJson({ reason: 'bored' }))).toEqual({
      reason: 'manual',
      detail: 'unknown stop reason "bored"',
    });
  });
});
