/**
 * The budget stops of a job, `stop.maxEpochs` and `stop.maxSeconds`. The master is their one
 * owner: its task queue holds the epoch counter and the start time in the fenced Redis state, so
 * a budget holds across master failovers and whether or not an evaluator runs. The evaluator
 * stops jobs on their metric instead (`target`, `patience`: `services/evaluator/src/stop-policy.ts`).
 */

/** A job's budgets; each is optional. */
export interface JobBudget {
  /** Epochs to complete before the job stops. */
  maxEpochs?: number;
  /** Seconds after its start at which the job stops. */
  maxSeconds?: number;
}

/** A spent budget: the stop reason and what was spent. */
export interface BudgetStop {
  reason: 'maxEpochs' | 'maxSeconds';
  detail: string;
}

/** The epoch budget, once `epochsCompleted` epochs are done; undefined while some is left. */
export function epochBudgetSpent(budget: JobBudget, epochsCompleted: number): BudgetStop | undefined {
  const { maxEpochs } = budget;
  if (maxEpochs === undefined || epochsCompleted < maxEpochs) return undefined;
  return {
    reason: 'maxEpochs',
    detail: `epoch budget spent: ${epochsCompleted} epochs completed, stop.maxEpochs is ${maxEpochs}`,
  };
}

/** The time budget, at `nowMs` for a job started at `startedAtMs`; undefined while some is left. */
export function timeBudgetSpent(budget: JobBudget, startedAtMs: number, nowMs: number): BudgetStop | undefined {
  const { maxSeconds } = budget;
  if (maxSeconds === undefined || nowMs - startedAtMs < maxSeconds * 1000) return undefined;
  const ranSeconds = ((nowMs - startedAtMs) / 1000).toFixed(1);
  return {
    reason: 'maxSeconds',
    detail: `time budget spent: ${ranSeconds} s since the job started, stop.maxSeconds is ${maxSeconds}`,
  };
}
