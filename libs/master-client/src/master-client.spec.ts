import { jetstream, type JetStreamManager } from '@nats-io/jetstream';
import { Kvm, type KV } from '@nats-io/kv';
import type { Subscription } from '@nats-io/transport-node';
import {
  CONSUMERS,
  STREAMS,
  SUBJECTS,
  connectNats,
  decodeJsonObject,
  encodeJson,
  ensureStreams,
  ensureTrainerConsumer,
  type NatsConnection,
  type TaskMessage,
} from '#libs/messaging';
import { startTestServers, type TestServers } from '../../../test/support/servers.js';
import { MasterClient } from './master-client.js';
import { MasterUnavailableError, RequestAbortedError, JobUnknownToMasterError } from './errors.js';

const JOB = 'mc-job';

function task(taskId: number, dispatchId: string): TaskMessage {
  return {
    jobId: JOB,
    epoch: 0,
    taskId,
    dispatchId,
    chunks: [{ file: '/data/a.recordio', offset: 0, numRecords: 10 }],
  };
}

/** Collects warnings so the tests can wait for a retry without timing assertions. */
function recordingLogger() {
  const lines: string[] = [];
  let waiters: { match: RegExp; resolve: () => void }[] = [];
  const note = (line: string) => {
    lines.push(line);
    waiters = waiters.filter((w) => (w.match.test(line) ? (w.resolve(), false) : true));
  };
  return {
    lines,
    log: note,
    warn: note,
    error: note,
    waitFor(match: RegExp): Promise<void> {
      if (lines.some((l) => match.test(l))) return Promise.resolve();
      return new Promise((resolve) => waiters.push({ match, resolve }));
    },
  };
}

describe('master client (real NATS)', () => {
  let servers: TestServers;
  let nc: NatsConnection;
  let jsm: JetStreamManager;

  beforeAll(async () => {
    servers = await startTestServers();
    nc = await connectNats(servers.nats.url, 'master-client-test');
    jsm = await ensureStreams(nc);
    await ensureTrainerConsumer(jsm, JOB, SUBJECTS.tasks(JOB));
  });

  afterAll(async () => {
    await nc?.close();
    await servers?.stop();
  });

  let responders: Subscription[] = [];
  afterEach(() => {
    for (const s of responders) s.unsubscribe();
    responders = [];
  });

  /** A minimal master: answers claims by dispatch id and records reports. */
  function respondToClaims(current: Map<number, string>): { claims: Record<string, unknown>[] } {
    const claims: Record<string, unknown>[] = [];
    responders.push(
      nc.subscribe(SUBJECTS.taskClaim(JOB), {
        callback: (_err, msg) => {
          const claim = decodeJsonObject(msg.subject, msg.data);
          claims.push(claim);
          const ok = current.get(claim['taskId'] as number) === claim['dispatchId'];
          msg.respond(
            encodeJson(ok ? { ok: true, deadlineMs: 12345, leaseMs: 10_000 } : { ok: false, reason: 'stale' }),
          );
        },
      }),
    );
    return { claims };
  }

  it('master client - garbage and stale task messages are skipped, the current one is claimed', async () => {
    const js = jetstream(nc);
    const { claims } = respondToClaims(new Map([[2, 'd-new']]));
    await js.publish(SUBJECTS.tasks(JOB), new TextEncoder().encode('{not json'));
    await js.publish(SUBJECTS.tasks(JOB), encodeJson({ jobId: JOB, epoch: 0 }));
    await js.publish(SUBJECTS.tasks(JOB), encodeJson(task(2, 'd-old')));
    await js.publish(SUBJECTS.tasks(JOB), encodeJson(task(2, 'd-new')));
    const logger = recordingLogger();
    const client = new MasterClient(nc, 'trainer-a', { logger });

    const claimed = await client.nextTask(JOB, { timeoutMs: 5000 });

    expect(claimed).toEqual({ ...task(2, 'd-new'), deadlineMs: 12345, leaseMs: 10_000 });
    expect(claims.map((c) => c['dispatchId'])).toEqual(['d-old', 'd-new']);
    expect(claims[1]).toMatchObject({ jobId: JOB, taskId: 2, epoch: 0, trainerId: 'trainer-a' });
    expect(logger.lines.filter((l) => l.startsWith('skipping task message'))).toHaveLength(2);
    const info = await jsm.consumers.info(STREAMS.tasks.name, CONSUMERS.trainers(JOB));
    expect(info.num_pending).toBe(0);
    expect(info.num_ack_pending).toBe(0);
  });

  it('master client - nextTask returns null when no task comes in time', async () => {
    const client = new MasterClient(nc, 'trainer-a', { logger: recordingLogger() });
    await expect(client.nextTask(JOB, { timeoutMs: 1000 })).resolves.toBeNull();
  });

  it('master client - nextTask returns null while the job has no consumer', async () => {
    const client = new MasterClient(nc, 'trainer-a', { logger: recordingLogger() });
    await expect(client.nextTask('no-such-job', { timeoutMs: 300 })).resolves.toBeNull();
  });

  it('master client - a claim refused because the job stopped gives null', async () => {
    responders.push(
      nc.subscribe(SUBJECTS.taskClaim(JOB), {
        callback: (_e, m) => {
          m.respond(encodeJson({ ok: false, reason: 'stopped' }));
        },
      }),
    );
    await jetstream(nc).publish(SUBJECTS.tasks(JOB), encodeJson(task(5, 'd5')));
    const client = new MasterClient(nc, 'trainer-a', { logger: recordingLogger() });
    await expect(client.nextTask(JOB, { timeoutMs: 3000 })).resolves.toBeNull();
  });

  it('master client - pullTask says why no task came: none in time, or the job is full', async () => {
    const client = new MasterClient(nc, 'trainer-a', { logger: recordingLogger() });
    await expect(client.pullTask(JOB, { timeoutMs: 500 })).resolves.toEqual({ kind: 'none', reason: 'no-task' });
    responders.push(
      nc.subscribe(SUBJECTS.taskClaim(JOB), {
        callback: (_e, m) => {
          m.respond(encodeJson({ ok: false, reason: 'full' }));
        },
      }),
    );
    await jetstream(nc).publish(SUBJECTS.tasks(JOB), encodeJson(task(6, 'd6')));
    await expect(client.pullTask(JOB, { timeoutMs: 3000 })).resolves.toEqual({ kind: 'none', reason: 'full' });
  });

  it('master client - a task pulled as the signal fires is handed back, not dropped', async () => {
    const abort = new AbortController();
    const claims: Record<string, unknown>[] = [];
    const reports: Record<string, unknown>[] = [];
    responders.push(
      nc.subscribe(SUBJECTS.taskClaim(JOB), {
        callback: (_e, m) => {
          claims.push(decodeJsonObject(m.subject, m.data));
          m.respond(encodeJson({ ok: true, deadlineMs: 1 }));
        },
      }),
      nc.subscribe(SUBJECTS.taskReport(JOB), {
        callback: (_e, m) => {
          reports.push(decodeJsonObject(m.subject, m.data));
          m.respond(encodeJson({ ok: true, counted: true }));
        },
      }),
    );
    const client = new MasterClient(nc, 'trainer-c', { logger: recordingLogger() });
    // The pull is waiting on the server when SIGTERM arrives; a task message comes right after.
    const pulling = client.pullTask(JOB, { timeoutMs: 5000, signal: abort.signal });
    await new Promise((r) => setTimeout(r, 200));
    abort.abort();
    await jetstream(nc).publish(SUBJECTS.tasks(JOB), encodeJson(task(7, 'd7')));
    await expect(pulling).resolves.toEqual({ kind: 'none', reason: 'aborted' });
    expect(claims).toEqual([]);
    expect(reports).toEqual([expect.objectContaining({ taskId: 7, dispatchId: 'd7', outcome: 'returned' })]);
  });

  it('master client - renewClaim claims the task again and says when it is no longer ours', async () => {
    const current = new Map([[8, 'd8']]);
    const { claims } = respondToClaims(current);
    const client = new MasterClient(nc, 'trainer-a', { logger: recordingLogger() });
    await expect(client.renewClaim(task(8, 'd8'))).resolves.toEqual({ ok: true, deadlineMs: 12345, leaseMs: 10_000 });
    current.set(8, 'd9');
    await expect(client.renewClaim(task(8, 'd8'))).resolves.toEqual({ ok: false, reason: 'stale' });
    expect(claims.map((c) => c['trainerId'])).toEqual(['trainer-a', 'trainer-a']);
    for (const s of responders) s.unsubscribe();
    responders = [];
    const impatient = new MasterClient(nc, 'trainer-a', {
      logger: recordingLogger(),
      requestTimeoutMs: 100,
      claimRetryBudgetMs: 300,
      initialBackoffMs: 20,
    });
    await expect(impatient.renewClaim(task(8, 'd8'))).resolves.toEqual({ ok: false, reason: 'unreachable' });
  });

  it('master client - a report is retried until the master replies', async () => {
    const logger = recordingLogger();
    const client = new MasterClient(nc, 'trainer-a', { logger, requestTimeoutMs: 300, initialBackoffMs: 20 });
    const reply = client.reportDone({ ...task(1, 'd1') }, 42);
    await logger.waitFor(/unanswered/);
    const reports: Record<string, unknown>[] = [];
    responders.push(
      nc.subscribe(SUBJECTS.taskReport(JOB), {
        callback: (_e, m) => {
          reports.push(decodeJsonObject(m.subject, m.data));
          m.respond(encodeJson({ ok: true, counted: true }));
        },
      }),
    );
    await expect(reply).resolves.toEqual({ ok: true, counted: true });
    expect(reports[0]).toEqual({
      jobId: JOB,
      taskId: 1,
      epoch: 0,
      dispatchId: 'd1',
      trainerId: 'trainer-a',
      outcome: 'done',
      samples: 42,
    });
  });

  it('master client - failed and returned reports carry their outcome', async () => {
    const reports: Record<string, unknown>[] = [];
    responders.push(
      nc.subscribe(SUBJECTS.taskReport(JOB), {
        callback: (_e, m) => {
          reports.push(decodeJsonObject(m.subject, m.data));
          m.respond(encodeJson({ ok: true, counted: false }));
        },
      }),
    );
    const client = new MasterClient(nc, 'trainer-b', { logger: recordingLogger() });
    await expect(client.reportFailed(task(3, 'd3'), 'bad chunk at byte 0')).resolves.toEqual({
      ok: true,
      counted: false,
    });
    await client.handBack(task(4, 'd4'));
    expect(reports.map((r) => [r['outcome'], r['error']])).toEqual([
      ['failed', 'bad chunk at byte 0'],
      ['returned', undefined],
    ]);
  });

  it('master client - an unanswered report gives up when its signal fires', async () => {
    const logger = recordingLogger();
    const client = new MasterClient(nc, 'trainer-a', { logger, requestTimeoutMs: 200, initialBackoffMs: 20 });
    const abort = new AbortController();
    const reply = client.handBack(task(1, 'd1'), { signal: abort.signal });
    await logger.waitFor(/unanswered/);
    abort.abort();
    await expect(reply).rejects.toBeInstanceOf(RequestAbortedError);
  });

  it('master client - job status: reply, unknown job, no master', async () => {
    const client = new MasterClient(nc, 'cli', { logger: recordingLogger(), requestTimeoutMs: 500 });
    await expect(client.jobStatus(JOB)).rejects.toBeInstanceOf(MasterUnavailableError);
    responders.push(
      nc.subscribe(SUBJECTS.allStatus, {
        callback: (_e, m) => {
          const jobId = m.subject.split('.')[2];
          m.respond(
            encodeJson(
              jobId === JOB
                ? { jobId, state: 'running', epoch: 1, tasks: { total: 2, todo: 1, pending: 1, done: 0, discarded: 0 } }
                : { error: `unknown job ${jobId}` },
            ),
          );
        },
      }),
    );
    await expect(client.jobStatus(JOB)).resolves.toMatchObject({ jobId: JOB, state: 'running', epoch: 1 });
    await expect(client.jobStatus('other')).rejects.toBeInstanceOf(JobUnknownToMasterError);
  });

  it('master client - submit and stop are stored by their streams', async () => {
    const client = new MasterClient(nc, 'cli', { logger: recordingLogger() });
    const submitAck = await client.submitJob({ id: 'x' });
    expect(submitAck.stream).toBe(STREAMS.jobs.name);
    const rawAck = await client.submitJob('{"id": "raw"}');
    expect(rawAck.seq).toBe(submitAck.seq + 1);
    const stopAck = await client.stopJob(JOB, 'target', 'accuracy 0.9');
    expect(stopAck.stream).toBe(STREAMS.control.name);
    const stored = await jsm.streams.getMessage(STREAMS.control.name, { seq: stopAck.seq });
    expect(stored && decodeJsonObject('stop', stored.data)).toEqual({ reason: 'target', detail: 'accuracy 0.9' });
    await expect(client.stopJob('Bad Id')).rejects.toThrow(/invalid job id/);
  });

  it('master client - watchJobs gives current records first, then changes, skipping garbage', async () => {
    const kv: KV = await new Kvm(nc).create('tributary-jobs', { history: 1 });
    const record = { jobId: 'w1', state: 'running', spec: {}, epoch: 0, startedAt: new Date().toISOString() };
    await kv.put('w1', encodeJson(record));
    const client = new MasterClient(nc, 'cli', { logger: recordingLogger() });
    const watch = await client.watchJobs();
    const it = watch[Symbol.asyncIterator]();
    const first = await it.next();
    expect(first.value).toMatchObject({ jobId: 'w1', initial: true, record });
    await kv.put('w2', new TextEncoder().encode('garbage'));
    await kv.put('w1', encodeJson({ ...record, state: 'stopped', reason: 'manual' }));
    const second = await it.next();
    expect(second.value).toMatchObject({ jobId: 'w1', initial: false, record: { state: 'stopped' } });
    // The bucket keeps one value per key: a change replaced before the watch read it is never
    // seen, so the delete waits until the change was.
    await kv.delete('w1');
    const third = await it.next();
    expect(third.value).toMatchObject({ jobId: 'w1', record: null });
    watch.stop();
  });
});
