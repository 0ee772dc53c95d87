import type { ClaimedTask, TaskPull } from '#libs/master-client';
import { TaskAhead, TaskCountdown } from './task-ahead.js';
import { TaskLease } from './task-lease.js';

const TASK: ClaimedTask = { jobId: 'j', epoch: 0, taskId: 1, dispatchId: 'd', chunks: [], deadlineMs: 0, leaseMs: 0 };

function chunks(...sizes: number[]) {
  return { chunks: sizes.map((numRecords, i) => ({ file: 'f', offset: i * 100, numRecords })) };
}

/** A countdown over a fake clock; `step(ms, samples)` trains one minibatch that took `ms`. */
function countdown(task: ReturnType<typeof chunks>, batchSize: number, leadMs: number) {
  let now = 0;
  let firedAfter: number | undefined;
  let steps = 0;
  const c = new TaskCountdown(
    task,
    batchSize,
    leadMs,
    () => (firedAfter ??= steps),
    () => now,
  );
  return {
    step(ms: number, samples = batchSize) {
      now += ms;
      steps += 1;
      c.minibatch(samples);
    },
    firedAfter: () => firedAfter,
  };
}

/** A pull that resolves when told to. */
function pendingPull() {
  let resolve!: (p: TaskPull) => void;
  let signal: AbortSignal | undefined;
  const promise = new Promise<TaskPull>((r) => (resolve = r));
  return {
    pull: (s: AbortSignal) => ((signal = s), promise),
    resolve,
    signal: () => signal,
  };
}

const renewer = { renewClaim: async () => ({ ok: true as const, deadlineMs: Date.now() + 60_000, leaseMs: 60_000 }) };

describe('task ahead', () => {
  it('task countdown - fires once, when at most one minibatch is left', () => {
    // 10 records in batches of 3: 4 minibatches; the lead is too short to fire earlier.
    const c = countdown(chunks(4, 6), 3, 0);
    c.step(5);
    c.step(5);
    expect(c.firedAfter()).toBeUndefined();
    c.step(5);
    expect(c.firedAfter()).toBe(3);
    c.step(5, 1);
    expect(c.firedAfter()).toBe(3);
  });

  it('task countdown - fires earlier when the minibatches left take at most the lead', () => {
    // 64 minibatches of 10 ms: 100 ms of lead is 10 of them.
    const c = countdown(chunks(640), 10, 100);
    for (let i = 0; i < 64; i++) c.step(10);
    expect(c.firedAfter()).toBe(54);
    // A task with a single minibatch fires after it.
    const one = countdown(chunks(3), 10, 100);
    one.step(1_000, 3);
    expect(one.firedAfter()).toBe(1);
  });

  it('task ahead - a task claimed ahead is leased at once, and taken', async () => {
    const pull = pendingPull();
    const claimed: ClaimedTask[] = [];
    const ahead = new TaskAhead({
      pull: pull.pull,
      lease: (task) => new TaskLease(renewer, task),
      onClaimed: (task) => claimed.push(task),
    });
    const taking = ahead.take();
    pull.resolve({ kind: 'claimed', task: TASK });
    const taken = await taking;
    expect(taken).toMatchObject({ task: TASK });
    expect(claimed).toEqual([TASK]);
    expect(taken !== undefined && 'lease' in taken && taken.lease.lost.aborted).toBe(false);
    if (taken !== undefined && 'lease' in taken) taken.lease.end();
  });

  it('task ahead - an empty pull is used only if it was still on its way when taken', async () => {
    const early = pendingPull();
    const ahead = new TaskAhead({ pull: early.pull, lease: (task) => new TaskLease(renewer, task) });
    early.resolve({ kind: 'none', reason: 'no-task' });
    await new Promise((r) => setImmediate(r));
    await expect(ahead.take()).resolves.toBeUndefined();

    const late = pendingPull();
    const waiting = new TaskAhead({ pull: late.pull, lease: (task) => new TaskLease(renewer, task) });
    const taking = waiting.take();
    late.resolve({ kind: 'none', reason: 'no-task' });
    await expect(taking).resolves.toEqual({ kind: 'none', reason: 'no-task' });
  });

  it('task ahead - cancel stops the pull and gives back the task it had claimed', async () => {
    const pull = pendingPull();
    const ahead = new TaskAhead({ pull: pull.pull, lease: (task) => new TaskLease(renewer, task) });
    const cancelling = ahead.cancel();
    expect(pull.signal()?.aborted).toBe(true);
    // The claim was granted just as the pull was given up: the caller hands it back.
    pull.resolve({ kind: 'claimed', task: TASK });
    const held = await cancelling;
    expect(held?.task).toEqual(TASK);
    held?.lease.end();

    const empty = pendingPull();
    const none = new TaskAhead({ pull: empty.pull, lease: (task) => new TaskLease(renewer, task) });
    empty.resolve({ kind: 'none', reason: 'aborted' });
    await expect(none.cancel()).resolves.toBeUndefined();
  });
});
