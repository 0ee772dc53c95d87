import { epochBudgetSpent, timeBudgetSpent } from './job-budget.js';

describe('job budget', () => {
  test('job budget - the epoch budget is spent once maxEpochs epochs are completed, not before', () => {
    expect(epochBudgetSpent({ maxEpochs: 3 }, 2)).toBeUndefined();
    expect(epochBudgetSpent({ maxEpochs: 3 }, 3)).toEqual({
      reason: 'maxEpochs',
      detail: 'epoch budget spent: 3 epochs completed, stop.maxEpochs is 3',
    });
    expect(epochBudgetSpent({}, 1_000)).toBeUndefined();
  });

  test('job budget - the time budget is spent maxSeconds after the start, not before', () => {
    const start = 1_000_000;
    expect(timeBudgetSpent({ maxSeconds: 10 }, start, start + 9_999)).toBeUndefined();
    expect(timeBudgetSpent({ maxSeconds: 10 }, start, start + 10_000)).toEqual({
      reason: 'maxSeconds',
      detail: 'time budget spent: 10.0 s since the job started, stop.maxSeconds is 10',
    });
    expect(timeBudgetSpent({}, start, start + 1e9)).toBeUndefined();
  });
});
