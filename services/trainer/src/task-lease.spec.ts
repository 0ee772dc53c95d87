import type { ClaimRenewal, ClaimedTask } from '#libs/master-client';
import { TaskLease } from './task-lease.js';

const TASK: ClaimedTask = { jobId: 'j', epoch: 0, taskId: 1, dispatchId: 'd', chunks: [], deadlineMs: 0 };

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
    const master = renewer([{ ok: true, deadlineMs: 0 }]);
    const lease = new TaskLease(master, TASK, { minRenewMs: 5 });
    await eventually(() => master.asked.length >= 3);
    lease.end();
    const count = master.asked.length;
    await new Promise((r) => setTimeout(r, 30));
    expect(master.asked.length).toBeLessThanOrEqual(count + 1);
    expect(lease.lost.aborted).toBe(false);
  });

  it('task lease - an unanswered renewal is tried again; a refused one fires lost', async () => {
    const master = renewer([
      { ok: false, reason: 'unreachable' },
      { ok: true, deadlineMs: 0 },
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
