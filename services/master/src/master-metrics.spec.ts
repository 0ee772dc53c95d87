import type { JobSpec } from '#libs/job-spec';
import { ServiceMetrics } from '#libs/service-metrics';
import type { JobChannels } from './job-channels.js';
import { JobDriver } from './job-driver.js';
import type { JobRoster } from './job-roster.js';
import { MasterMetrics } from './master-metrics.js';
import { planTasks } from './task-plan.js';
import { TaskQueue, type TaskQueueOptions } from './task-queue.js';

const OPTIONS: TaskQueueOptions = { maxTaskFailures: 1, timeout: { floorMs: 1000, multiplier: 3, window: 20 } };
const SPEC = { id: 'job-a', trainers: { min: 1, max: 4 }, training: { chunksPerTask: 1 } } as unknown as JobSpec;

/** A driver of a 4-task job around `queue`, brought where the test needs it beforehand. */
function driverOf(queue: TaskQueue): JobDriver {
  const plan = planTasks(
    Array.from({ length: 4 }, (_, i) => ({ file: '/d/a.recordio', offset: i * 10, numRecords: 3 })),
    1,
  );
  return new JobDriver(SPEC, plan, queue, {} as JobChannels, OPTIONS, '7:master-a:abcdef', 3, 1);
}

/** The master's metrics for `drivers`, leading, and a function that reads one gauge's samples. */
async function scrape(drivers: JobDriver[]): Promise<(name: string) => Record<string, number>> {
  const metrics = new ServiceMetrics({ processMetrics: false });
  const roster = { running: () => drivers } as unknown as JobRoster;
  await new MasterMetrics(metrics, roster).takeOffice();
  const text = await metrics.render();
  return (name) => {
    const samples: Record<string, number> = {};
    for (const line of text.split('\n')) {
      const match = new RegExp(`^${name}\\{job="job-a",state="([a-z]+)"\\} (\\d+)$`).exec(line);
      if (match) samples[match[1]!] = Number(match[2]);
    }
    return samples;
  };
}

describe('master metrics', () => {
  test('master metrics - the next epoch has its own task gauge while it is open; the tasks gauge stays the current epoch', async () => {
    const queue = TaskQueue.create({ jobId: 'job-a', runId: 'r', taskCount: 4, startedAt: 0 }, OPTIONS);
    const current = queue.dispatch(4).result;
    for (const d of current) queue.claim({ ...d, trainerId: 't1' });
    queue.report({ ...current[0]!, trainerId: 't1', outcome: 'done', samples: 3 });
    const driver = driverOf(queue);
    expect(driver.nextEpochTasks()).toBeUndefined();
    let sample = await scrape([driver]);
    expect(sample('tributary_master_tasks')).toEqual({ todo: 0, pending: 3, done: 1, discarded: 0 });
    expect(sample('tributary_master_next_epoch_tasks')).toEqual({});

    // Nothing of epoch 0 is left to hand out: two tasks of epoch 1 go out, and one is done ahead.
    const ahead = queue.dispatch(2).result;
    expect(ahead.map((d) => d.epoch)).toEqual([1, 1]);
    queue.claim({ ...ahead[0]!, trainerId: 't2' });
    queue.report({ ...ahead[0]!, trainerId: 't2', outcome: 'done', samples: 3 });
    expect(driver.nextEpochTasks()).toEqual({ total: 4, todo: 2, pending: 1, done: 1, discarded: 0 });
    sample = await scrape([driver]);
    expect(sample('tributary_master_tasks')).toEqual({ todo: 0, pending: 3, done: 1, discarded: 0 });
    expect(sample('tributary_master_next_epoch_tasks')).toEqual({ todo: 2, pending: 1, done: 1, discarded: 0 });

    // Epoch 0 ends: epoch 1 is the current one, with what it did, and no next epoch is open.
    for (const d of current.slice(1)) queue.report({ ...d, trainerId: 't1', outcome: 'done', samples: 3 });
    expect(queue.epoch).toBe(1);
    sample = await scrape([driver]);
    expect(sample('tributary_master_tasks')).toEqual({ todo: 2, pending: 1, done: 1, discarded: 0 });
    expect(sample('tributary_master_next_epoch_tasks')).toEqual({});
  });
});
