import { JobProgress } from './job-progress.js';

describe('job progress', () => {
  test('job progress - the line shows the epoch, its tasks, and the next epoch once its tasks are done ahead', () => {
    const progress = new JobProgress('job-p', 'accuracy');
    progress.onStatus({
      state: 'running',
      epoch: 3,
      tasks: { total: 15, done: 14, pending: 1, discarded: 0 },
      epochs: [
        { epoch: 3, done: 14 },
        { epoch: 4, done: 2 },
      ],
    });
    expect(progress.line()).toMatch(
      /^job-p \| \d+s \| epoch 3 \| tasks 14\/15 \(1 in flight; epoch 4: 2 done\) \| step 0$/,
    );
    progress.onStatus({
      state: 'running',
      epoch: 4,
      tasks: { total: 15, done: 2, pending: 0, discarded: 0 },
      epochs: [{ epoch: 4, done: 2 }],
    });
    expect(progress.line()).toMatch(/\| epoch 4 \| tasks 2\/15 \| step 0$/);
  });

  test('job progress - a retried task names its epoch', () => {
    const progress = new JobProgress('job-p', 'accuracy');
    const line = progress.onEvent({
      type: 'task-retried',
      jobId: 'job-p',
      epoch: 5,
      taskId: 2,
      failures: 1,
      error: 'timeout',
      at: new Date(0).toISOString(),
    });
    expect(line).toBe('task 2 of epoch 5 retried (1 failures): timeout');
  });
});
