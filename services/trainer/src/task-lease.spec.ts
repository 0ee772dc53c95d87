import { jest } from '@jest/globals';
import type { ClaimRenewal, ClaimedTask } from '#libs/master-client';
import { TaskLease } from './task-lease.js';

const TASK: ClaimedTask = { jobId: 'j', epoch: 0, taskId: 1, dispatchId: 'd', chunks: [], deadlineMs: 0, leaseMs: 0 };

/** Answers renewals from a script (the last answer repeats). */
function renewer(answers: ClaimRenewal[]) {
  const asked: number[] = [];
  return {
    asked,
    renewClaim: async (): Promise<ClaimRenewal> => {
      asked.push(Date.now());
      return answers[Math.min(asked.length - 1, answers.length - 1)]!;
    },
  };
}

async function eventually(check: () => boolean): Promise<void> {
  while (!check()) await new Promise((r) => setTimeout(r, 5));
}

describe('task lease', () => {
  it('task lease - renews the claim until it ends', async () => {
    const master = renewer([{ ok: true, deadlineMs: 0, leaseMs: 0 }]);
    const lease = new TaskLease(master, TASK, { minRenewMs: 5 });
    await eventually(() => master.asked.length >= 3);
    lease.end();
    const count = master.asked.length;
    await new Promise((r) => setTimeout(r, 30));
    expect(master.asked.length).toBeLessThanOrEqual(count + 1);
    expect(lease.lost.aborted).toBe(false);
  });

  it('task lease - renews every third of the lease granted, by its own clock, whatever the deadline says', async () => {
    jest.useFakeTimers();
    try {
      // The deadlines are long past by this clock (a master whose clock is behind): only the
      // leases count.
      const master = renewer([{ ok: true, deadlineMs: 0, leaseMs: 3_000 }]);
      const lease = new TaskLease(master, { ...TASK, leaseMs: 9_000 }, { minRenewMs: 5 });
      await jest.advanceTimersByTimeAsync(2_999);
      expect(master.asked).toHaveLength(0);
      await jest.advanceTimersByTimeAsync(1);
      expect(master.asked).toHaveLength(1);
      await jest.advanceTimersByTimeAsync(2_000);
      expect(master.asked).toHaveLength(3);
      lease.end();
      await jest.advanceTimersByTimeAsync(5_000);
      expect(master.asked).toHaveLength(3);
    } finally {
      jest.useRealTimers();
    }
  });

  it('task lease - an unanswered renewal is tried again; a refused one fires lost', async () => {
    const master = renewer([
      { ok: false, reason: 'unreachable' },
      { ok: true, deadlineMs: 0, leaseMs: 0 },
      { ok: false, reason: 'stale' },
    ]);
    const reasons: string[] = [];
    const lease = new TaskLease(master, TASK, { minRenewMs: 5, onLost: (r) => reasons.push(r) });
    await eventually(() => lease.lost.aborted);
    expect(master.asked).toHaveLength(3);
    expect(reasons).toEqual(['stale']);
    await new Promise((r) => setTimeout(r, 30));
    expect(master.asked).toHaveLength(3);
  });
});
