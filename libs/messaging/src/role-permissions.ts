import { KV_BUCKETS, STREAMS, SUBJECTS } from './subjects.js';

/** The parts of Tributary that connect to NATS, each under its own NATS user. */
export const NATS_ROLES = ['operator', 'master', 'pserver', 'trainer', 'evaluator'] as const;

/** One of {@link NATS_ROLES}: `operator` is the user of the CLI, the others are the services. */
export type NatsRole = (typeof NATS_ROLES)[number];

/**
 * What a NATS user may do: the subjects it may publish to and subscribe to (anything else is
 * refused), and whether it may answer requests it received (`allow_responses`).
 */
export interface RolePermissions {
  publish: string[];
  subscribe: string[];
  allowResponses: boolean;
}

const API = '$JS.API';
const kvStream = (bucket: string) => `KV_${bucket}`;
const SERVICE_STREAMS = [...Object.values(STREAMS).map((s) => s.name), ...Object.values(KV_BUCKETS).map(kvStream)];

/** Reads a stream through consumers: create, look up, pull, acknowledge, and flow control. */
function consume(stream: string): string[] {
  return [
    `${API}.CONSUMER.CREATE.${stream}`,
    `${API}.CONSUMER.CREATE.${stream}.>`,
    `${API}.CONSUMER.DURABLE.CREATE.${stream}.*`,
    `${API}.CONSUMER.INFO.${stream}.*`,
    `${API}.CONSUMER.DELETE.${stream}.*`,
    `${API}.CONSUMER.MSG.NEXT.${stream}.*`,
    `${API}.CONSUMER.NAMES.${stream}`,
    `${API}.CONSUMER.LIST.${stream}`,
    `$JS.ACK.${stream}.>`,
    `$JS.FC.${stream}.>`,
  ];
}

/** Pulls from the durable consumers someone else made on a stream, and acknowledges. */
function pull(stream: string): string[] {
  return [`${API}.CONSUMER.INFO.${stream}.*`, `${API}.CONSUMER.MSG.NEXT.${stream}.*`, `$JS.ACK.${stream}.>`];
}

/** Reads a KV bucket: its stream's info (keys), entries, and watches. */
function readBucket(bucket: string): string[] {
  const stream = kvStream(bucket);
  return [
    `${API}.STREAM.INFO.${stream}`,
    `${API}.STREAM.MSG.GET.${stream}`,
    `${API}.DIRECT.GET.${stream}`,
    `${API}.DIRECT.GET.${stream}.>`,
    ...consume(stream),
  ];
}

/** Puts, deletes and purges entries of a KV bucket under `keys` (a key filter). */
function writeBucket(bucket: string, keys = '>'): string[] {
  return [`$KV.${bucket}.${keys}`];
}

/**
 * What every service does on start: look up and create (when missing) Tributary's streams and
 * buckets with their fixed configuration, which cannot change an existing one, and keep its
 * own entry in the members bucket.
 */
function service(role: NatsRole): string[] {
  return [
    `${API}.INFO`,
    `${API}.STREAM.NAMES`,
    ...SERVICE_STREAMS.flatMap((s) => [`${API}.STREAM.CREATE.${s}`, `${API}.STREAM.INFO.${s}`]),
    ...writeBucket(KV_BUCKETS.members, `${role}.>`),
  ];
}

const INBOX = '_INBOX.>';
const ANY_STATUS = SUBJECTS.allStatus;
const TASK_REQUESTS = [SUBJECTS.allTaskClaims, SUBJECTS.allTaskReports];

/**
 * Each role's NATS permissions, the least that lets it work:
 * - `operator` (the CLI) submits and stops jobs, asks for status and lists, and reads events
 *   and the buckets; it cannot touch the streams' configuration.
 * - `master` takes job specs and stop requests, runs the task queues, the jobs directory and the
 *   events, and answers status, list, claim, report and fault requests.
 * - `pserver` registers itself in the pserver directory and publishes snapshots and round notices.
 * - `trainer` pulls tasks and sends claims, reports and faults, and hears round notices; it
 *   cannot submit or stop jobs, and cannot write the pserver directory.
 * - `evaluator` reads snapshots and events, asks for a job's status, publishes metrics events,
 *   and stops a job when its stop policy says so.
 */
export const ROLE_PERMISSIONS: Record<NatsRole, RolePermissions> = {
  operator: {
    publish: [
      SUBJECTS.submit,
      SUBJECTS.allStop,
      ANY_STATUS,
      SUBJECTS.list,
      `${API}.INFO`,
      `${API}.STREAM.INFO.${STREAMS.events.name}`,
      `${API}.STREAM.MSG.GET.${STREAMS.events.name}`,
      ...consume(STREAMS.events.name),
      ...Object.values(KV_BUCKETS).flatMap(readBucket),
    ],
    subscribe: [INBOX, SUBJECTS.allEvents],
    allowResponses: false,
  },
  master: {
    publish: [
      ...service('master'),
      SUBJECTS.allEvents,
      SUBJECTS.allTasks,
      ...[STREAMS.jobs, STREAMS.control, STREAMS.tasks].flatMap((s) => consume(s.name)),
      ...[STREAMS.tasks, STREAMS.control, STREAMS.events, STREAMS.snapshots].map(
        (s) => `${API}.STREAM.PURGE.${s.name}`,
      ),
      ...Object.values(KV_BUCKETS).flatMap(readBucket),
      ...writeBucket(KV_BUCKETS.jobs),
    ],
    subscribe: [INBOX, ANY_STATUS, SUBJECTS.list, SUBJECTS.allJobFaults, ...TASK_REQUESTS, SUBJECTS.allEvents],
    allowResponses: true,
  },
  pserver: {
    publish: [
      ...service('pserver'),
      SUBJECTS.allSnapshots,
      SUBJECTS.allRounds,
      ...[KV_BUCKETS.jobs, KV_BUCKETS.pservers].flatMap(readBucket),
      ...writeBucket(KV_BUCKETS.pservers),
    ],
    subscribe: [INBOX],
    allowResponses: false,
  },
  trainer: {
    publish: [
      ...service('trainer'),
      ...TASK_REQUESTS,
      SUBJECTS.allJobFaults,
      ...pull(STREAMS.tasks.name),
      ...[KV_BUCKETS.jobs, KV_BUCKETS.pservers].flatMap(readBucket),
    ],
    subscribe: [INBOX, SUBJECTS.allEvents, SUBJECTS.allRounds],
    allowResponses: false,
  },
  evaluator: {
    publish: [
      ...service('evaluator'),
      SUBJECTS.allEvents,
      SUBJECTS.allStop,
      SUBJECTS.allJobFaults,
      ANY_STATUS,
      `${API}.STREAM.MSG.GET.${STREAMS.events.name}`,
      ...[STREAMS.events, STREAMS.snapshots].flatMap((s) => consume(s.name)),
      ...[KV_BUCKETS.jobs, KV_BUCKETS.pservers].flatMap(readBucket),
    ],
    subscribe: [INBOX, SUBJECTS.allEvents],
    allowResponses: false,
  },
};
