import { NATS_ROLES, ROLE_PERMISSIONS, type NatsRole } from './role-permissions.js';
import { KV_BUCKETS, SUBJECTS } from './subjects.js';

/** NATS subject matching: `*` one token, `>` the rest. */
function matches(pattern: string, subject: string): boolean {
  const p = pattern.split('.');
  const s = subject.split('.');
  for (let i = 0; i < p.length; i++) {
    if (p[i] === '>') return s.length > i;
    if (i >= s.length || (p[i] !== '*' && p[i] !== s[i])) return false;
  }
  return p.length === s.length;
}

const mayPublish = (role: NatsRole, subject: string) =>
  ROLE_PERMISSIONS[role].publish.some((pattern) => matches(pattern, subject));
const rolesThatMayPublish = (subject: string) => NATS_ROLES.filter((role) => mayPublish(role, subject));

test('role permissions - only the operator submits jobs; the operator and the stop policy stop them', () => {
  expect(rolesThatMayPublish(SUBJECTS.submit)).toEqual(['operator']);
  expect(rolesThatMayPublish(SUBJECTS.stop('job-1'))).toEqual(['operator', 'evaluator']);
});

test('role permissions - only pservers write the pserver directory, only the master the jobs directory', () => {
  expect(rolesThatMayPublish(`$KV.${KV_BUCKETS.pservers}.shard-0`)).toEqual(['pserver']);
  expect(rolesThatMayPublish(`$KV.${KV_BUCKETS.jobs}.job-1`)).toEqual(['master']);
  expect(rolesThatMayPublish(`$KV.${KV_BUCKETS.members}.trainer.t-1`)).toEqual(['trainer']);
});

test('role permissions - nobody deletes or reconfigures a stream, the operator creates none, only the master purges', () => {
  for (const stream of ['TRIBUTARY_JOBS', 'TRIBUTARY_TASKS', `KV_${KV_BUCKETS.pservers}`]) {
    expect(rolesThatMayPublish(`$JS.API.STREAM.DELETE.${stream}`)).toEqual([]);
    expect(rolesThatMayPublish(`$JS.API.STREAM.UPDATE.${stream}`)).toEqual([]);
    expect(mayPublish('operator', `$JS.API.STREAM.CREATE.${stream}`)).toBe(false);
  }
  expect(rolesThatMayPublish('$JS.API.STREAM.PURGE.TRIBUTARY_TASKS')).toEqual(['master']);
  expect(rolesThatMayPublish('$JS.API.CONSUMER.MSG.NEXT.TRIBUTARY_JOBS.master')).toEqual(['master']);
});

test('role permissions - only the master answers requests, and events come from the master and the evaluator', () => {
  expect(NATS_ROLES.filter((role) => ROLE_PERMISSIONS[role].allowResponses)).toEqual(['master']);
  expect(rolesThatMayPublish(SUBJECTS.events('job-1'))).toEqual(['master', 'evaluator']);
});
