import type { JobEvent, JobListEntry, JobStatusReply, MemberStatus } from '#libs/messaging';
import { DashboardState, MEMBER_STALE_MS } from './dashboard-state.js';

const T0 = Date.parse('2026-01-01T00:00:00.000Z');
const iso = (ms: number) => new Date(T0 + ms).toISOString();

function listEntry(jobId: string, overrides: Partial<JobListEntry> = {}): JobListEntry {
  return {
    jobId,
    state: 'running',
    epoch: 0,
    metric: 'accuracy',
    trainers: 2,
    startedAt: iso(0),
    output: '/out',
    ...overrides,
  };
}

function status(jobId: string, samples: number, overrides: Partial<JobStatusReply> = {}): JobStatusReply {
  return {
    jobId,
    state: 'running',
    epoch: 1,
    tasks: { total: 8, todo: 3, pending: 2, done: 3, discarded: 0 },
    trainers: 2,
    startedAt: iso(0),
    epochs: [{ epoch: 0, done: 8, discarded: 0, doneCounts: {} }],
    samples,
    ...overrides,
  };
}

function metrics(jobId: string, version: number, at: number, accuracy: number, loss: number): JobEvent {
  return {
    type: 'metrics',
    jobId,
    at: iso(at),
    version,
    epoch: 0,
    metrics: { accuracy, loss },
    examples: 256,
    best: accuracy,
    samples: version * 16,
  };
}

function member(role: MemberStatus['role'], id: string, atMs: number, extra: Partial<MemberStatus> = {}): MemberStatus {
  return { role, id, pid: 100, host: 'h', state: 'ready', at: iso(atMs), ...extra };
}

describe('dashboard state', () => {
  let now: number;
  let state: DashboardState;
  beforeEach(() => {
    now = T0;
    state = new DashboardState(() => now);
  });

  test('dashboard state - evaluations become points of the metric and loss by step and time', () => {
    state.onJobList([listEntry('a')]);
    state.onEvent({ type: 'started', jobId: 'a', at: iso(10), epoch: 0, tasksPerEpoch: 8, records: 512 });
    state.onEvent(metrics('a', 10, 2_000, 0.5, 1.2));
    state.onEvent(metrics('a', 20, 4_000, 0.7, 0.8));
    const job = state.snapshot().jobs[0];
    expect(job.points).toEqual([
      { step: 10, t: T0 + 2_000, samples: 160, metric: 0.5, loss: 1.2 },
      { step: 20, t: T0 + 4_000, samples: 320, metric: 0.7, loss: 0.8 },
    ]);
    expect(job).toMatchObject({ lastValue: 0.7, best: 0.7, state: 'running' });
    expect(job.events.map((e) => e.type)).toEqual(['started', 'metrics', 'metrics']);
  });

  test('dashboard state - a loss metric plots the loss as the metric', () => {
    state.onJobList([listEntry('l', { metric: 'loss' })]);
    state.onEvent(metrics('l', 5, 1_000, 0.4, 0.9));
    expect(state.snapshot().jobs[0].points[0].metric).toBe(0.9);
  });

  test('dashboard state - throughput comes from the sample counter between two status replies', () => {
    state.onJobStatus(status('a', 1_000));
    expect(state.snapshot().jobs[0].throughput).toEqual([]);
    now += 2_000;
    state.onJobStatus(status('a', 1_800));
    const job = state.snapshot().jobs[0];
    expect(job.throughput).toEqual([{ t: T0 + 2_000, samplesPerSecond: 400 }]);
    expect(job.tasks).toEqual({ total: 8, todo: 3, pending: 2, done: 3, discarded: 0 });
    expect(job.tasksEpoch).toBe(1);
    expect(job.epochs).toHaveLength(1);
  });

  test('dashboard state - members come and go with their bucket entries and lapse when stale', () => {
    state.onMember('trainer.t1', member('trainer', 't1', 0, { backend: 'wasm', samplesPerSecond: 50, taskId: 3 }));
    state.onMember('pserver.p0', member('pserver', 'p0', 0, { shard: 0, versions: { a: 7 } }));
    state.onMember('trainer.t2', member('trainer', 't2', 0));
    expect(state.snapshot().members.map((m) => m.id)).toEqual(['p0', 't1', 't2']);
    state.onMember('trainer.t2', undefined);
    expect(state.snapshot().members.map((m) => m.id)).toEqual(['p0', 't1']);
    state.onMember('trainer.t1', member('trainer', 't1', 10_000));
    now += 10_000 + MEMBER_STALE_MS - 1;
    expect(state.snapshot().members.map((m) => m.id)).toEqual(['t1']);
  });

  test('dashboard state - running jobs come first, then the others newest first', () => {
    state.onJobList([
      listEntry('old', { state: 'stopped', reason: 'target', startedAt: iso(0) }),
      listEntry('newer', { state: 'failed', startedAt: iso(5_000) }),
      listEntry('live', { startedAt: iso(1_000) }),
    ]);
    expect(state.snapshot().jobs.map((j) => j.jobId)).toEqual(['live', 'newer', 'old']);
  });

  test('dashboard state - stop and failure events end a job; a refused resubmission leaves a running one alone', () => {
    state.onJobList([listEntry('a'), listEntry('b')]);
    state.onEvent({ type: 'failed', jobId: 'a', at: iso(1), error: 'bad', field: 'optimizer.type', refused: true });
    state.onEvent({ type: 'stopped', jobId: 'b', at: iso(2), reason: 'manual' });
    const byId = new Map(state.snapshot().jobs.map((j) => [j.jobId, j]));
    expect(byId.get('a')?.state).toBe('running');
    expect(byId.get('b')).toMatchObject({ state: 'stopped', reason: 'manual', stoppedAt: iso(2) });
    state.onEvent({
      type: 'failed',
      jobId: 'x',
      at: iso(3),
      error: 'expected a number',
      field: 'stop.target',
      refused: true,
    });
    expect(state.snapshot().jobs.find((j) => j.jobId === 'x')).toMatchObject({
      state: 'failed',
      error: 'stop.target: expected a number',
    });
  });

  test('dashboard state - a job id used again drops the curves of its earlier run', () => {
    state.onEvent({ type: 'started', jobId: 'a', at: iso(0), epoch: 0, tasksPerEpoch: 8, records: 512 });
    state.onEvent(metrics('a', 10, 1_000, 0.5, 1));
    state.onEvent({ type: 'stopped', jobId: 'a', at: iso(2_000), reason: 'target' });
    state.onEvent({ type: 'started', jobId: 'a', at: iso(60_000), epoch: 0, tasksPerEpoch: 8, records: 512 });
    state.onEvent(metrics('a', 10, 61_000, 0.6, 0.9));
    const job = state.snapshot().jobs[0];
    expect(job.points.map((p) => p.t)).toEqual([T0 + 61_000]);
    expect(job.events.map((e) => e.type)).toEqual(['started', 'metrics']);
    expect(job).toMatchObject({ state: 'running', reason: undefined });
  });

  test('dashboard state - listeners hear of every change, connection included', () => {
    let heard = 0;
    const off = state.onChange(() => (heard += 1));
    state.setConnected(true);
    state.setConnected(true);
    state.onMember('trainer.t', member('trainer', 't', 0));
    off();
    state.setConnected(false);
    expect(heard).toBe(2);
    expect(state.snapshot().connected).toBe(false);
  });
});
