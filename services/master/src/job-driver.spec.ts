import type { JobSpec } from '#libs/job-spec';
import type { TaskMessage } from '#libs/messaging';
import { FencedWriteError } from './errors.js';
import type { JobChannels } from './job-channels.js';
import { JobDriver } from './job-driver.js';
import { planTasks } from './task-plan.js';
import { TaskQueue, type QueueChange, type TaskQueueOptions } from './task-queue.js';

const OPTIONS: TaskQueueOptions = { maxTaskFailures: 1, timeout: { floorMs: 1000, multiplier: 3, window: 20 } };
const SPEC = { id: 'job-a', trainers: { min: 1, max: 4 }, training: { chunksPerTask: 1 } } as unknown as JobSpec;

/** Channels that record what goes out, in order; `refuse` makes every Redis write fail at the fence. */
class RecordingChannels {
  readonly calls: string[] = [];
  readonly fences: string[] = [];
  refuse = false;

  async persist(_jobId: string, change: QueueChange, fence: string): Promise<void> {
    this.fences.push(fence);
    if (this.refuse) throw new FencedWriteError('job-a', fence);
    this.calls.push(`persist ${change.tasks.map((t) => `${t.taskId}:${t.status}`).join(',')}`);
  }

  async publishTask(task: TaskMessage): Promise<void> {
    this.calls.push(`publish ${task.taskId}`);
  }

  publishEvent(): void {}

  async putRecord(): Promise<void> {}

  async purgeTasks(): Promise<void> {}
}

function driver(channels: RecordingChannels): JobDriver {
  const plan = planTasks(
    Array.from({ length: 4 }, (_, i) => ({ file: '/d/a.recordio', offset: i * 10, numRecords: 3 })),
    1,
  );
  const queue = TaskQueue.create({ jobId: 'job-a', runId: 'r', taskCount: plan.length, startedAt: 0 }, OPTIONS);
  return new JobDriver(SPEC, plan, queue, channels as unknown as JobChannels, OPTIONS, '7:master-a:abcdef');
}

describe('job driver', () => {
  test('job driver - a dispatch is persisted, under the term fence, before its task message goes out', async () => {
    const channels = new RecordingChannels();
    await driver(channels).tick(1);
    expect(channels.calls).toEqual(['persist 0:pending,1:pending', 'publish 0', 'publish 1']);
    expect(new Set(channels.fences)).toEqual(new Set(['7:master-a:abcdef']));
  });

  test('job driver - a write refused by the fence publishes nothing', async () => {
    const channels = new RecordingChannels();
    channels.refuse = true;
    await expect(driver(channels).tick(1)).rejects.toThrow(FencedWriteError);
    expect(channels.calls).toEqual([]);
  });
});
