import assert from 'node:assert/strict';
import fc from 'fast-check';
import { epochTaskOrder } from '#libs/data-order';
import { TaskQueue, type QueueChange, type TaskQueueOptions, type TaskState } from './task-queue.js';

/** Deep equality of plain data, whichever realm built the objects. */
function same(a: unknown, b: unknown): void {
  assert.deepStrictEqual(JSON.parse(JSON.stringify(a)), JSON.parse(JSON.stringify(b)));
}

const OPTIONS: TaskQueueOptions = { maxTaskFailures: 2, timeout: { floorMs: 1000, multiplier: 3, window: 20 } };

function setup(taskCount: number, options: Partial<TaskQueueOptions> = {}) {
  let now = 1_000_000;
  const clock = { now: () => now, advance: (ms: number) => (now += ms) };
  const queue = TaskQueue.create(
    { jobId: 'job-a', runId: 'r1', taskCount, startedAt: now },
    { ...OPTIONS, ...options },
    clock.now,
  );
  return { queue, clock };
}

/** Dispatches and claims every todo task of the current epoch (and none of the next). */
function claimAll(queue: TaskQueue, trainerId = 't1') {
  const { result } = queue.dispatch(queue.counts().todo);
  for (const d of result) expect(queue.claim({ ...d, trainerId }).result.ok).toBe(true);
  return result;
}

describe('task queue', () => {
  test('task queue - dispatch hands out todo tasks up to the limit, each with a new dispatch id', () => {
    const { queue } = setup(5);
    const first = queue.dispatch(2);
    expect(first.result.map((d) => d.taskId)).toEqual([0, 1]);
    expect(new Set(first.result.map((d) => d.dispatchId)).size).toBe(2);
    expect(first.change?.tasks.map((t) => t.status)).toEqual(['pending', 'pending']);
    expect(first.change?.job.dispatchSeq).toBe(2);
    expect(queue.unclaimedCount()).toBe(2);
    expect(queue.dispatch(3).result.map((d) => d.taskId)).toEqual([2, 3, 4]);
    // With none of epoch 0 left to hand out, epoch 1's follow, up to the limit.
    const next = queue.dispatch(10);
    expect(next.result.map((d) => [d.epoch, d.taskId])).toEqual([0, 1, 2, 3, 4].map((id) => [1, id]));
    expect(next.change?.next?.map((t) => t.status)).toEqual(Array(5).fill('pending'));
    expect(queue.dispatch(10)).toEqual({ result: [], change: null, events: [] });
  });

  test('task queue - a claim starts the deadline from the moving average of task durations', () => {
    const { queue, clock } = setup(3);
    const [d0] = queue.dispatch(1).result;
    clock.advance(100);
    const claim = queue.claim({ ...d0!, trainerId: 't1' });
    expect(claim.result).toEqual({ ok: true, deadlineMs: clock.now() + 1000, leaseMs: 1000 });
    clock.advance(2000);
    queue.report({ ...d0!, trainerId: 't1', outcome: 'done', samples: 10 });
    expect(queue.timeoutMs()).toBe(6000);
    expect(queue.samples).toBe(10);
  });

  test('task queue - a renewed claim extends the deadline and keeps the first claim time for the duration', () => {
    const { queue, clock } = setup(3);
    const [d0] = queue.dispatch(1).result;
    queue.claim({ ...d0!, trainerId: 't1' });
    const firstClaim = clock.now();
    clock.advance(900);
    const renewal = queue.claim({ ...d0!, trainerId: 't1' });
    expect(renewal.result).toEqual({ ok: true, deadlineMs: clock.now() + 1000, leaseMs: 1000 });
    expect(renewal.change?.tasks[0]).toMatchObject({ claimedAt: firstClaim, deadline: clock.now() + 1000 });
    clock.advance(900);
    expect(queue.expire().result).toBe(0);
    queue.claim({ ...d0!, trainerId: 't1' });
    clock.advance(200);
    queue.report({ ...d0!, trainerId: 't1', outcome: 'done', samples: 10 });
    // The task took 2000 ms from its first claim: 3 × 2000.
    expect(queue.timeoutMs()).toBe(6000);
  });

  test('task queue - a claimed task past its deadline returns to todo with a failure', () => {
    const { queue, clock } = setup(2);
    const [d0] = queue.dispatch(1).result;
    queue.claim({ ...d0!, trainerId: 't1' });
    clock.advance(999);
    expect(queue.expire().result).toBe(0);
    clock.advance(1);
    const t = queue.expire();
    expect(t.result).toBe(1);
    expect(queue.task(0)).toMatchObject({ status: 'todo', failures: 1, lastError: 'timeout' });
    expect(t.events).toEqual([
      expect.objectContaining({ type: 'task-retried', taskId: 0, failures: 1, error: 'timeout' }),
    ]);
    expect(queue.report({ ...d0!, trainerId: 't1', outcome: 'done' }).result).toEqual({ ok: true, counted: false });
  });

  test('task queue - a gone trainer: its first claim counts the timeout, a task it claimed ahead returns without one', () => {
    for (const renewFirst of [false, true]) {
      const { queue, clock } = setup(4);
      const [d0, d1, d2] = queue.dispatch(3).result;
      queue.claim({ ...d0!, trainerId: 't1' });
      queue.claim({ ...d2!, trainerId: 't2' });
      clock.advance(100);
      // Claimed ahead while t1 works on task 0.
      queue.claim({ ...d1!, trainerId: 't1' });
      clock.advance(500);
      // Renewed last, the task in hand may be the later of the two deadlines: it still counts.
      if (renewFirst) queue.claim({ ...d0!, trainerId: 't1' });
      queue.claim({ ...d2!, trainerId: 't2' });
      clock.advance(500);
      const t = queue.expire();
      // Tasks past their deadline: both, or only the one claimed ahead when the other was renewed.
      expect(t.result).toBe(renewFirst ? 1 : 2);
      expect(queue.task(0)).toMatchObject({ status: 'todo', failures: 1, lastError: 'timeout' });
      expect(queue.task(1)).toMatchObject({ status: 'todo', failures: 0 });
      expect(queue.task(1)).not.toHaveProperty('claimedBy');
      expect(queue.task(2)).toMatchObject({ status: 'pending', claimedBy: 't2' });
      expect(t.events).toEqual([
        expect.objectContaining({ type: 'task-retried', taskId: 0, failures: 1, error: 'timeout' }),
      ]);
      expect(t.change?.tasks.map((x) => x.taskId).sort()).toEqual([0, 1]);
      // Nothing of t1's is left to time out later.
      clock.advance(2_000);
      queue.claim({ ...d2!, trainerId: 't2' });
      expect(queue.expire().result).toBe(0);
    }
  });

  test('task queue - an unclaimed dispatch past its deadline returns to todo without a failure', () => {
    const { queue, clock } = setup(1);
    queue.dispatch(1);
    clock.advance(1000);
    const t = queue.expire();
    expect(t.events).toEqual([]);
    expect(queue.task(0)).toMatchObject({ status: 'todo', failures: 0 });
  });

  test('task queue - a claim or report with a stale dispatch id is ignored', () => {
    const { queue, clock } = setup(2);
    const [old] = queue.dispatch(1).result;
    clock.advance(1000);
    queue.expire();
    const [fresh] = queue.dispatch(1).result;
    expect(fresh!.dispatchId).not.toBe(old!.dispatchId);
    expect(queue.claim({ ...old!, trainerId: 't1' }).result).toEqual({ ok: false, reason: 'stale' });
    expect(queue.claim({ ...fresh!, trainerId: 't2' }).result.ok).toBe(true);
    const stale = queue.report({ ...old!, trainerId: 't1', outcome: 'done' });
    expect(stale).toEqual({ result: { ok: true, counted: false }, change: null, events: [] });
    expect(queue.claim({ ...fresh!, trainerId: 't3' }).result).toEqual({ ok: false, reason: 'stale' });
    expect(queue.claim({ ...fresh!, trainerId: 't2' }).result.ok).toBe(true);
  });

  test('task queue - a task failing more than maxTaskFailures times is discarded and the next epoch starts', () => {
    const { queue } = setup(2);
    const [a, b] = claimAll(queue);
    queue.report({ ...b!, trainerId: 't1', outcome: 'done' });
    let last = queue.report({ ...a!, trainerId: 't1', outcome: 'failed', error: 'boom' });
    for (let i = 0; i < 2; i += 1) {
      expect(last.events).toEqual([expect.objectContaining({ type: 'task-retried', failures: i + 1, error: 'boom' })]);
      const [again] = claimAll(queue);
      last = queue.report({ ...again!, trainerId: 't1', outcome: 'failed', error: 'boom' });
    }
    expect(last.events.map((e) => e.type)).toEqual(['task-discarded', 'epoch']);
    expect(last.change?.closedEpochs).toEqual([{ epoch: 0, done: 1, discarded: 1 }]);
    expect(queue.epoch).toBe(1);
    expect(queue.counts()).toEqual({ total: 2, todo: 2, pending: 0, done: 0, discarded: 0 });
    expect(queue.task(0)?.failures).toBe(0);
  });

  test('task queue - the last pending task failing into discard advances the epoch', () => {
    const { queue } = setup(1, { maxTaskFailures: 0 });
    const [a] = claimAll(queue);
    const t = queue.report({ ...a!, trainerId: 't1', outcome: 'failed', error: 'x' });
    expect(t.events.map((e) => e.type)).toEqual(['task-discarded', 'epoch']);
    expect(queue.epoch).toBe(1);
  });

  test('task queue - the last pending task timing out into discard advances the epoch', () => {
    const { queue, clock } = setup(1, { maxTaskFailures: 0 });
    claimAll(queue);
    clock.advance(5000);
    const t = queue.expire();
    expect(t.events.map((e) => e.type)).toEqual(['task-discarded', 'epoch']);
    expect(t.change?.job.epoch).toBe(1);
  });

  test('task queue - a returned task goes back to todo without a failure', () => {
    const { queue } = setup(1);
    const [a] = claimAll(queue);
    const t = queue.report({ ...a!, trainerId: 't1', outcome: 'returned' });
    expect(t.result.counted).toBe(true);
    expect(t.events).toEqual([]);
    expect(queue.task(0)).toMatchObject({ status: 'todo', failures: 0 });
    expect(queue.epoch).toBe(0);
  });

  test('task queue - a task is counted once per epoch, with its duration from the claim; a repeated report is not counted', () => {
    const { queue, clock } = setup(2);
    const [a, b] = claimAll(queue);
    clock.advance(1_500);
    expect(queue.report({ ...a!, trainerId: 't1', outcome: 'done' }).change?.counted).toEqual({
      epoch: 0,
      taskId: 0,
      durationMs: 1_500,
    });
    expect(queue.report({ ...a!, trainerId: 't1', outcome: 'done' }).result.counted).toBe(false);
    queue.report({ ...b!, trainerId: 't1', outcome: 'done' });
    const [a1] = claimAll(queue);
    queue.report({ ...a1!, trainerId: 't1', outcome: 'done' });
    expect(queue.accounting()).toEqual([
      { epoch: 0, done: 2, discarded: 0, doneCounts: { '0': 1, '1': 1 } },
      { epoch: 1, done: 1, discarded: 0, doneCounts: { '0': 1 } },
    ]);
  });

  test('task queue - reaching maxEpochs stops the job in the same change', () => {
    const { queue } = setup(1, { maxEpochs: 2 });
    for (let e = 0; e < 2; e += 1) {
      const [a] = claimAll(queue);
      const t = queue.report({ ...a!, trainerId: 't1', outcome: 'done' });
      if (e === 1) {
        expect(t.change?.job).toMatchObject({ epoch: 2, state: 'stopped', reason: 'maxEpochs' });
        expect(t.events.map((ev) => ev.type)).toEqual(['epoch', 'stopped']);
        expect(t.events[1]).toMatchObject({
          reason: 'maxEpochs',
          detail: 'epoch budget spent: 2 epochs completed, stop.maxEpochs is 2',
        });
      }
    }
    expect(queue.state).toBe('stopped');
    expect(queue.dispatch(5).result).toEqual([]);
    expect(queue.stop('manual').result).toBe(false);
  });

  test('task queue - maxSeconds stops the job on the wall clock', () => {
    const { queue, clock } = setup(1, { maxSeconds: 10 });
    expect(queue.expire().change).toBeNull();
    clock.advance(10_000);
    const t = queue.expire();
    expect(t.change?.job).toMatchObject({ state: 'stopped', reason: 'maxSeconds' });
    expect(queue.detail).toBe('time budget spent: 10.0 s since the job started, stop.maxSeconds is 10');
    expect(queue.claim({ taskId: 0, epoch: 0, dispatchId: 'x', trainerId: 't' }).result).toEqual({
      ok: false,
      reason: 'stopped',
    });
  });

  test('task queue - a claim past maxTrainers is refused full and the task returns to todo', () => {
    const { queue } = setup(3, { maxTrainers: 1 });
    const [a, b] = queue.dispatch(2).result;
    expect(queue.claim({ ...a!, trainerId: 't1' }).result.ok).toBe(true);
    expect(queue.claim({ ...b!, trainerId: 't2' }).result).toEqual({ ok: false, reason: 'full' });
    expect(queue.task(1)).toMatchObject({ status: 'todo', failures: 0 });
  });

  test('task queue - a fair share below maxTrainers refuses the claims beyond it', () => {
    const { queue } = setup(4, { maxTrainers: 3 });
    queue.setTrainerShare(1);
    expect(queue.trainerLimit()).toBe(1);
    const [a, b] = queue.dispatch(2).result;
    expect(queue.claim({ ...a!, trainerId: 't1' }).result.ok).toBe(true);
    expect(queue.claim({ ...b!, trainerId: 't2' }).result).toEqual({ ok: false, reason: 'full' });
    queue.setTrainerShare(undefined);
    expect(queue.trainerLimit()).toBe(3);
    const [c] = queue.dispatch(1).result;
    expect(queue.claim({ ...c!, trainerId: 't2' }).result.ok).toBe(true);
  });

  test('task queue - the job fails after maxJobFaults set-up faults, naming the last cause', () => {
    const { queue } = setup(2, { maxJobFaults: 3 });
    expect(queue.fault('t1', 'Invalid typed array length: 78400000000').events).toEqual([]);
    expect(queue.fault('t2', 'Invalid typed array length: 78400000000').change?.job).toEqual({ faults: 2 });
    const third = queue.fault('t1', 'Invalid typed array length: 78400000000');
    expect(third.change?.job).toMatchObject({ faults: 3, state: 'failed' });
    expect(third.events).toEqual([
      {
        type: 'failed',
        jobId: 'job-a',
        error: '3 attempts to run it failed; the last (t1): Invalid typed array length: 78400000000',
      },
    ]);
    expect(queue.state).toBe('failed');
    expect(queue.dispatch(5).result).toEqual([]);
    expect(queue.fault('t1', 'again')).toEqual({ result: false, change: null, events: [] });
    expect(queue.stop('manual').result).toBe(false);
    // The count and the state survive a master failover.
    const restored = TaskQueue.restore(queue.snapshot(), OPTIONS);
    expect(restored.state).toBe('failed');
    expect(restored.faults).toBe(3);
  });

  test('task queue - an epoch whose every task was discarded for reported failures fails the job', () => {
    const { queue } = setup(2, { maxTaskFailures: 0, failBarrenEpochs: true });
    const [a, b] = claimAll(queue);
    queue.report({ ...a!, trainerId: 't1', outcome: 'failed', error: 'f.rio: chunk at byte 0: bad layout' });
    const t = queue.report({ ...b!, trainerId: 't1', outcome: 'failed', error: 'f.rio: chunk at byte 64: bad layout' });
    expect(t.events.map((e) => e.type)).toEqual(['task-discarded', 'epoch', 'failed']);
    expect(t.events.at(-1)).toMatchObject({
      error: 'epoch 0: all 2 tasks were discarded; the last error: f.rio: chunk at byte 64: bad layout',
    });
    expect(queue.state).toBe('failed');
  });

  test('task queue - an epoch with a task done, or lost to timeouts, does not fail the job', () => {
    const done = setup(2, { maxTaskFailures: 0, failBarrenEpochs: true }).queue;
    const [a, b] = claimAll(done);
    done.report({ ...a!, trainerId: 't1', outcome: 'done' });
    done.report({ ...b!, trainerId: 't1', outcome: 'failed', error: 'x' });
    expect(done.state).toBe('running');
    expect(done.epoch).toBe(1);
    const { queue: timedOut, clock } = setup(1, { maxTaskFailures: 0, failBarrenEpochs: true });
    claimAll(timedOut);
    clock.advance(5000);
    timedOut.expire();
    expect(timedOut.state).toBe('running');
    expect(timedOut.epoch).toBe(1);
  });

  test('task queue - restore re-arms the deadlines of pending tasks', () => {
    const { queue, clock } = setup(2);
    claimAll(queue);
    clock.advance(60_000);
    const restored = TaskQueue.restore(queue.snapshot(), OPTIONS, clock.now);
    expect(restored.expire().result).toBe(0);
    expect(restored.task(0)?.deadline).toBe(clock.now() + 1000);
  });

  test('task queue - a claim holds for the claim lease when the task timeout is longer; a dispatch for the timeout', () => {
    const options = { timeout: { floorMs: 30_000, multiplier: 3, window: 20 }, claimLeaseMs: 5_000 };
    const { queue, clock } = setup(3, options);
    const [d0, d1] = queue.dispatch(3).result;
    expect(d0!.deadline).toBe(clock.now() + 30_000);
    expect(queue.claim({ ...d0!, trainerId: 't1' }).result).toEqual({
      ok: true,
      deadlineMs: clock.now() + 5_000,
      leaseMs: 5_000,
    });
    queue.claim({ ...d1!, trainerId: 't2' });
    clock.advance(4_000);
    // t1 renews; t2 is gone.
    queue.claim({ ...d0!, trainerId: 't1' });
    clock.advance(1_500);
    expect(queue.expire().result).toBe(1);
    expect(queue.task(0)).toMatchObject({ status: 'pending', claimedBy: 't1' });
    expect(queue.task(1)).toMatchObject({ status: 'todo', failures: 1, lastError: 'timeout' });
    expect(queue.task(2)).toMatchObject({ status: 'pending' });

    // After a failover the claimed task gets one lease, the unclaimed one a whole timeout.
    clock.advance(60_000);
    const restored = TaskQueue.restore(queue.snapshot(), { ...OPTIONS, ...options }, clock.now);
    expect(restored.task(0)?.deadline).toBe(clock.now() + 5_000);
    expect(restored.task(2)?.deadline).toBe(clock.now() + 30_000);
    clock.advance(5_001);
    expect(restored.expire().result).toBe(1);
    expect(restored.task(0)).toMatchObject({ status: 'todo', failures: 1, lastError: 'timeout' });
    expect(restored.task(2)).toMatchObject({ status: 'pending' });
  });

  test('task queue - rearmClaims gives claimed tasks at least one lease from now; unclaimed ones keep theirs', () => {
    const { queue, clock } = setup(3, { claimLeaseMs: 500 });
    const [d0, d1] = queue.dispatch(3).result;
    queue.claim({ ...d0!, trainerId: 't1' });
    queue.claim({ ...d1!, trainerId: 't2' });
    clock.advance(400);
    queue.claim({ ...d1!, trainerId: 't2' });
    // Past t1's deadline, and short of t2's, while no renewal could arrive: both re-armed.
    clock.advance(200);
    const rearmed = queue.rearmClaims();
    expect(rearmed.result).toBe(2);
    expect(queue.task(0)?.deadline).toBe(clock.now() + 500);
    expect(queue.task(1)?.deadline).toBe(clock.now() + 500);
    expect(rearmed.change?.tasks.map((t) => t.taskId)).toEqual([0, 1]);
    // The unclaimed dispatch keeps its task timeout from its dispatch.
    expect(queue.task(2)?.deadline).toBe(clock.now() + 400);
    expect(queue.rearmClaims().result).toBe(0);
    expect(queue.expire().result).toBe(0);
    clock.advance(501);
    expect(queue.expire().result).toBe(3);
  });

  test('task queue - without shuffleSeed every epoch hands its tasks out by id', () => {
    const { queue } = setup(6);
    for (let epoch = 0; epoch < 3; epoch++) {
      const out = claimAll(queue);
      expect(out.map((d) => d.taskId)).toEqual([0, 1, 2, 3, 4, 5]);
      for (const d of out) queue.report({ ...d, trainerId: 't1', outcome: 'done', samples: 1 });
      expect(queue.epoch).toBe(epoch + 1);
    }
  });

  test('task queue - with shuffleSeed each epoch hands out every task once, in its own seeded order', () => {
    const { queue } = setup(12, { shuffleSeed: 99 });
    const orders: number[][] = [];
    for (let epoch = 0; epoch < 4; epoch++) {
      const order: number[] = [];
      // A small window, as the driver keeps, so the order is the hand-out order over time.
      while (queue.epoch === epoch) {
        const [d] = queue.dispatch(1).result;
        order.push(d!.taskId);
        queue.claim({ ...d!, trainerId: 't1' });
        queue.report({ ...d!, trainerId: 't1', outcome: 'done', samples: 1 });
      }
      expect([...order].sort((a, b) => a - b)).toEqual(Array.from({ length: 12 }, (_, i) => i));
      expect(order).toEqual(epochTaskOrder(12, 99, epoch));
      orders.push(order);
    }
    expect(new Set(orders.map((o) => o.join(','))).size).toBe(4);
    const again = setup(12, { shuffleSeed: 99 }).queue;
    expect(again.dispatch(12).result.map((d) => d.taskId)).toEqual(orders[0]);
  });

  test('task queue - a task back in todo goes out again before the tasks after it in the order', () => {
    const { queue } = setup(8, { shuffleSeed: 5 });
    const order = queue.dispatchOrder();
    const [first, second] = queue.dispatch(2).result;
    expect([first!.taskId, second!.taskId]).toEqual(order.slice(0, 2));
    queue.claim({ ...first!, trainerId: 't1' });
    queue.report({ ...first!, trainerId: 't1', outcome: 'failed', error: 'boom' });
    expect(queue.dispatch(2).result.map((d) => d.taskId)).toEqual([order[0], order[2]]);
  });

  test('task queue - a queue restored mid-epoch (master failover) goes on in the same order', () => {
    const { queue, clock } = setup(10, { shuffleSeed: 1234 });
    const epoch0 = queue.dispatchOrder();
    const head = queue.dispatch(3).result;
    for (const d of head) {
      queue.claim({ ...d, trainerId: 't1' });
      queue.report({ ...d, trainerId: 't1', outcome: 'done', samples: 1 });
    }
    const restored = TaskQueue.restore(queue.snapshot(), { ...OPTIONS, shuffleSeed: 1234 }, clock.now);
    expect(restored.dispatch(7).result.map((d) => d.taskId)).toEqual(epoch0.slice(3));
    expect(restored.dispatch(10).result.map((d) => d.taskId)).toEqual(epochTaskOrder(10, 1234, 1));
  });

  test('task queue - once an epoch has no task left to hand out, the next epoch opens; the current keeps priority', () => {
    const { queue } = setup(3, { shuffleSeed: 8 });
    const [a, b, c] = queue.dispatch(3).result;
    for (const d of [a, b, c]) queue.claim({ ...d!, trainerId: d === c ? 't2' : 't1' });
    queue.report({ ...a!, trainerId: 't1', outcome: 'done', samples: 4 });
    expect(queue.nextEpochOpen).toBe(false);
    const opened = queue.dispatch(1);
    const epoch1 = epochTaskOrder(3, 8, 1);
    expect(opened.result).toEqual([expect.objectContaining({ epoch: 1, taskId: epoch1[0] })]);
    // Every task of the next epoch is stored when it opens, the dispatched one pending.
    expect(opened.change?.tasks).toEqual([]);
    expect(opened.change?.next?.map((t) => [t.taskId, t.status]).sort()).toEqual(
      [0, 1, 2].map((id) => [id, id === epoch1[0] ? 'pending' : 'todo']),
    );
    expect(queue.nextEpochOpen).toBe(true);
    expect(queue.epoch).toBe(0);
    const [n0] = opened.result;
    expect(queue.claim({ ...n0!, trainerId: 't1' }).change?.next).toHaveLength(1);
    const doneAhead = queue.report({ ...n0!, trainerId: 't1', outcome: 'done', samples: 4 });
    expect(doneAhead.change?.counted).toMatchObject({ epoch: 1, taskId: n0!.taskId });
    expect(queue.counts(1)).toMatchObject({ done: 1, todo: 2 });
    // A task of the current epoch back in todo goes out before any more of the next.
    queue.report({ ...b!, trainerId: 't1', outcome: 'failed', error: 'boom' });
    expect(queue.dispatch(2).result.map((d) => [d.epoch, d.taskId])).toEqual([
      [0, b!.taskId],
      [1, epoch1[1]],
    ]);
    expect(queue.accounting().map((e) => [e.epoch, e.done])).toEqual([
      [0, 1],
      [1, 1],
    ]);
    expect(queue.unclaimedCount()).toBe(2);
  });

  test('task queue - the epoch that ends hands its place to the next with what it already did', () => {
    const { queue } = setup(2);
    const [a, b] = claimAll(queue);
    queue.report({ ...a!, trainerId: 't1', outcome: 'done', samples: 1 });
    const [n0] = queue.dispatch(1).result;
    queue.claim({ ...n0!, trainerId: 't1' });
    queue.report({ ...n0!, trainerId: 't1', outcome: 'done', samples: 1 });
    const end = queue.report({ ...b!, trainerId: 't1', outcome: 'done', samples: 1 });
    expect(end.change?.closedEpochs).toEqual([{ epoch: 0, done: 2, discarded: 0 }]);
    expect(end.change?.dropNext).toBe(true);
    expect(end.change?.next).toBeUndefined();
    expect(end.change?.tasks.map((t) => t.status)).toEqual(['done', 'todo']);
    expect(end.events.map((e) => e.type)).toEqual(['epoch']);
    expect(queue.epoch).toBe(1);
    expect(queue.nextEpochOpen).toBe(false);
    expect(queue.counts()).toEqual({ total: 2, todo: 1, pending: 0, done: 1, discarded: 0 });
    expect(queue.dispatch(5).result.map((d) => [d.epoch, d.taskId])).toEqual([
      [1, 1],
      [2, 0],
      [2, 1],
    ]);
  });

  test('task queue - a next epoch settled whole while the current ends ends with it, in order', () => {
    const { queue } = setup(2);
    const [a, b] = claimAll(queue);
    queue.report({ ...a!, trainerId: 't1', outcome: 'done', samples: 1 });
    for (const d of queue.dispatch(2).result) {
      queue.claim({ ...d, trainerId: 't2' });
      queue.report({ ...d, trainerId: 't2', outcome: 'done', samples: 1 });
    }
    // Epoch 1 is all done, and epoch 2 cannot open while epoch 0 has a task pending.
    expect(queue.dispatch(5).result).toEqual([]);
    const end = queue.report({ ...b!, trainerId: 't1', outcome: 'done', samples: 1 });
    expect(end.change?.closedEpochs).toEqual([
      { epoch: 0, done: 2, discarded: 0 },
      { epoch: 1, done: 2, discarded: 0 },
    ]);
    expect(end.events).toEqual([
      expect.objectContaining({ type: 'epoch', epoch: 1, done: 2 }),
      expect.objectContaining({ type: 'epoch', epoch: 2, done: 2 }),
    ]);
    expect(end.change?.job.epoch).toBe(2);
    expect(queue.counts()).toMatchObject({ todo: 2, done: 0 });
    expect(queue.samples).toBe(4);
  });

  test('task queue - no epoch past maxEpochs opens, and the budget stops the job when its last epoch ends', () => {
    const { queue } = setup(2, { maxEpochs: 2 });
    const [a, b] = claimAll(queue);
    queue.report({ ...a!, trainerId: 't1', outcome: 'done' });
    const ahead = queue.dispatch(5).result;
    expect(ahead.map((d) => d.epoch)).toEqual([1, 1]);
    for (const d of ahead) {
      queue.claim({ ...d, trainerId: 't2' });
      if (d.taskId === 0) queue.report({ ...d, trainerId: 't2', outcome: 'done' });
    }
    queue.report({ ...b!, trainerId: 't1', outcome: 'done' });
    expect(queue.epoch).toBe(1);
    // Epoch 1 is the last within the budget: epoch 2 never opens.
    expect(queue.dispatch(5).result).toEqual([]);
    const last = queue.report({ ...ahead.find((d) => d.taskId === 1)!, trainerId: 't2', outcome: 'done' });
    expect(last.change?.job).toMatchObject({ epoch: 2, state: 'stopped', reason: 'maxEpochs' });
  });

  test('task queue - a gone trainer loses its tasks of both epochs; the one it worked on counts the timeout', () => {
    const { queue, clock } = setup(2);
    const [a, b] = claimAll(queue, 't2');
    queue.report({ ...a!, trainerId: 't2', outcome: 'done' });
    clock.advance(100);
    const [n0] = queue.dispatch(1).result;
    queue.claim({ ...n0!, trainerId: 't2' });
    clock.advance(1_000);
    const t = queue.expire();
    expect(t.result).toBe(2);
    expect(queue.task(b!.taskId)).toMatchObject({ status: 'todo', failures: 1, lastError: 'timeout' });
    expect(queue.task(n0!.taskId, 1)).toMatchObject({ status: 'todo', failures: 0 });
    expect(t.events).toEqual([expect.objectContaining({ type: 'task-retried', epoch: 0, taskId: b!.taskId })]);
    expect(t.change?.tasks.map((x) => x.taskId)).toEqual([b!.taskId]);
    expect(t.change?.next?.map((x) => x.taskId)).toEqual([n0!.taskId]);
  });

  test('task queue - a queue restored with the next epoch open goes on with both', () => {
    const { queue, clock } = setup(3, { claimLeaseMs: 500 });
    const [a, b, c] = claimAll(queue);
    queue.report({ ...a!, trainerId: 't1', outcome: 'done' });
    queue.report({ ...b!, trainerId: 't1', outcome: 'done' });
    const [n0, n1] = queue.dispatch(2).result;
    queue.claim({ ...n0!, trainerId: 't2' });
    queue.report({ ...n0!, trainerId: 't2', outcome: 'done' });
    clock.advance(60_000);
    const restored = TaskQueue.restore(queue.snapshot(), OPTIONS, clock.now);
    expect(restored.nextEpochOpen).toBe(true);
    expect(restored.task(n1!.taskId, 1)?.deadline).toBe(clock.now() + restored.timeoutMs());
    expect(restored.task(c!.taskId)?.deadline).toBe(clock.now() + restored.claimLeaseMs());
    expect(restored.accounting().map((e) => [e.epoch, e.done])).toEqual([
      [0, 2],
      [1, 1],
    ]);
    expect(restored.report({ ...n1!, trainerId: 't2', outcome: 'done' }).result.counted).toBe(true);
    restored.report({ ...c!, trainerId: 't1', outcome: 'done' });
    expect(restored.epoch).toBe(1);
    expect(restored.counts()).toMatchObject({ done: 2, todo: 1 });
  });

  test('task queue - random sequences of events keep the accounting invariants', () => {
    type Op =
      | { k: 'dispatch'; n: number }
      | { k: 'claim'; pick: number; trainer: number; stale: boolean }
      | { k: 'report'; pick: number; outcome: 'done' | 'failed' | 'returned'; stale: boolean }
      | { k: 'time'; ms: number }
      | { k: 'expire' };
    const stale = fc.integer({ min: 0, max: 9 }).map((x) => x === 0);
    const op: fc.Arbitrary<Op> = fc.oneof(
      { weight: 3, arbitrary: fc.record({ k: fc.constant('dispatch' as const), n: fc.integer({ min: 1, max: 4 }) }) },
      {
        weight: 4,
        arbitrary: fc.record({
          k: fc.constant('claim' as const),
          pick: fc.nat(),
          trainer: fc.integer({ min: 0, max: 3 }),
          stale,
        }),
      },
      {
        weight: 5,
        arbitrary: fc.record({
          k: fc.constant('report' as const),
          pick: fc.nat(),
          outcome: fc.constantFrom(
            'done' as const,
            'done' as const,
            'done' as const,
            'failed' as const,
            'returned' as const,
          ),
          stale,
        }),
      },
      { weight: 1, arbitrary: fc.record({ k: fc.constant('time' as const), ms: fc.integer({ min: 0, max: 3000 }) }) },
      { weight: 1, arbitrary: fc.constant({ k: 'expire' as const }) },
    );
    /** Mostly recent dispatches, so that many claims and reports are current. */
    const pickIssued = <T>(issued: T[], pick: number): T =>
      issued[issued.length - 1 - (pick % Math.min(issued.length, 6))]!;
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 6 }),
        fc.integer({ min: 0, max: 3 }),
        fc.option(fc.integer(), { nil: undefined }),
        fc.array(op, { minLength: 20, maxLength: 150, size: 'max' }),
        (n, maxFailures, shuffleSeed, ops) => {
          const { queue, clock } = setup(n, { maxTaskFailures: maxFailures, shuffleSeed });
          const replica = new Replica(queue.snapshot().tasks);
          const issued: { taskId: number; epoch: number; dispatchId: string; trainerId?: string }[] = [];
          const apply = (change: QueueChange | null) => {
            const before = replica.epoch;
            if (change) replica.apply(change);
            for (let ended = before; ended < replica.epoch; ended++) {
              // An epoch ends only when every task is done or discarded.
              const summary = replica.closed.get(ended)!;
              assert.equal(summary.done + summary.discarded, n);
              assert.equal(
                Object.values(replica.doneCounts(ended)).reduce((s, c) => s + c, 0),
                summary.done,
              );
            }
          };
          for (const o of ops) {
            if (o.k === 'dispatch') {
              const t = queue.dispatch(o.n);
              issued.push(...t.result);
              // The next epoch's tasks go out only once the current one has none left to hand out.
              if (t.result.some((d) => d.epoch > queue.epoch)) assert.equal(queue.counts().todo, 0);
              apply(t.change);
            } else if (o.k === 'claim' && issued.length > 0) {
              const d = pickIssued(issued, o.pick);
              const trainerId = d.trainerId ?? `t${o.trainer}`;
              const t = queue.claim({ ...d, dispatchId: o.stale ? `${d.dispatchId}-old` : d.dispatchId, trainerId });
              if (t.result.ok) d.trainerId = trainerId;
              if (o.stale) assert.deepStrictEqual(t.result, { ok: false, reason: 'stale' });
              apply(t.change);
            } else if (o.k === 'report' && issued.length > 0) {
              const d = pickIssued(issued, o.pick);
              const t = queue.report({
                ...d,
                dispatchId: o.stale ? `${d.dispatchId}-old` : d.dispatchId,
                trainerId: d.trainerId ?? 't0',
                outcome: o.outcome,
                samples: 1,
              });
              if (o.stale) assert.equal(t.change, null);
              apply(t.change);
            } else if (o.k === 'time') {
              clock.advance(o.ms);
            } else if (o.k === 'expire') {
              apply(queue.expire().change);
            }
            const snap = queue.snapshot();
            // The persisted replica matches the in-memory state after every transition.
            same(replica.tasks(), snap.tasks);
            same(replica.next() ?? null, snap.next ?? null);
            assert.equal(replica.epoch, snap.epoch);
            assert.equal(replica.job['samples'] ?? 0, snap.samples);
            const c = queue.counts();
            assert.equal(c.todo + c.pending + c.done + c.discarded, n);
            for (const e of snap.epochs) {
              assert.ok(
                Object.values(e.doneCounts).every((x) => x === 1),
                `epoch ${e.epoch} counted a task twice`,
              );
              same(replica.doneCounts(e.epoch), e.doneCounts);
            }
            const open = [{ epoch: snap.epoch, tasks: snap.tasks }];
            if (snap.next !== undefined) open.push({ epoch: snap.epoch + 1, tasks: snap.next });
            for (const { epoch, tasks } of open) {
              for (const t of tasks) {
                if (t.status === 'pending') assert.ok(t.dispatchId !== undefined && t.deadline !== undefined);
                if (t.status === 'done') assert.equal(replica.doneCounts(epoch)[String(t.taskId)], 1);
                assert.ok(t.failures <= maxFailures + 1);
              }
              assert.equal(Object.keys(replica.doneCounts(epoch)).length, queue.counts(epoch).done);
            }
            // A restored queue (a failover) holds the same states, with fresh deadlines.
            const noDeadline = (tasks?: TaskState[]) => tasks?.map(({ deadline: _d, ...t }) => t) ?? null;
            const restored = TaskQueue.restore(snap, OPTIONS, clock.now).snapshot();
            same(noDeadline(restored.next), noDeadline(snap.next));
            same(restored.epochs, snap.epochs);
          }
        },
      ),
      { numRuns: 150 },
    );
  });
});

/** What the store would hold after applying each change: the Redis layout in miniature. */
class Replica {
  readonly job: Record<string, unknown> = {};
  readonly closed = new Map<number, { done: number; discarded: number }>();
  private readonly taskMap = new Map<number, TaskState>();
  private readonly nextMap = new Map<number, TaskState>();
  private readonly counts = new Map<number, Record<string, number>>();

  constructor(tasks: TaskState[]) {
    for (const t of tasks) this.taskMap.set(t.taskId, t);
  }

  get epoch(): number {
    return (this.job['epoch'] as number | undefined) ?? 0;
  }

  apply(change: QueueChange): void {
    if (change.dropNext) this.nextMap.clear();
    Object.assign(this.job, change.job);
    for (const t of change.tasks) this.taskMap.set(t.taskId, structuredClone(t));
    for (const t of change.next ?? []) this.nextMap.set(t.taskId, structuredClone(t));
    if (change.counted) {
      const c = this.doneCounts(change.counted.epoch);
      c[String(change.counted.taskId)] = (c[String(change.counted.taskId)] ?? 0) + 1;
      this.counts.set(change.counted.epoch, c);
    }
    for (const closed of change.closedEpochs ?? []) this.closed.set(closed.epoch, closed);
  }

  tasks(): TaskState[] {
    return [...this.taskMap.values()].sort((a, b) => a.taskId - b.taskId);
  }

  /** The next epoch's tasks, or undefined when none are stored. */
  next(): TaskState[] | undefined {
    if (this.nextMap.size === 0) return undefined;
    return [...this.nextMap.values()].sort((a, b) => a.taskId - b.taskId);
  }

  doneCounts(epoch: number): Record<string, number> {
    return { ...(this.counts.get(epoch) ?? {}) };
  }
}
