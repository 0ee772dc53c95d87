import type { JobSpec } from '#libs/job-spec';
import type { TaskMessage } from '#libs/messaging';
import { FencedWriteError, LostWritesError } from './errors.js';
import type { JobChannels } from './job-channels.js';
import type { StoredJob } from './job-store.js';
import { JobDriver } from './job-driver.js';
import { planTasks } from './task-plan.js';
import { TaskQueue, type QueueChange, type TaskQueueOptions } from './task-queue.js';

const OPTIONS: TaskQueueOptions = { maxTaskFailures: 1, timeout: { floorMs: 1000, multiplier: 3, window: 20 } };
const SPEC = { id: 'job-a', trainers: { min: 1, max: 4 }, training: { chunksPerTask: 1 } } as unknown as JobSpec;

/**
 * Channels that record what goes out, in order, with the write count each Redis write follows.
 * `refuse` makes every write fail at the fence; `lost` makes Redis hold that many writes of the
 * job (fewer than the driver made), so the next transition finds the count off.
 */
class RecordingChannels {
  readonly calls: string[] = [];
  readonly fences: string[] = [];
  refuse = false;
  writes = 1;
  lost: number | undefined;
  /** The next write fails as a lost connection would, after landing or not. */
  failNext: 'landed' | 'not landed' | undefined;
  /** What `store.load` finds. */
  held: StoredJob | undefined;
  readonly store = { load: async (): Promise<StoredJob | undefined> => this.held };

  async persist(_jobId: string, change: QueueChange, fence: string, writes: number): Promise<number> {
    this.fences.push(fence);
    if (this.refuse) throw new FencedWriteError('job-a', fence);
    if (this.lost !== undefined) throw new LostWritesError('job-a', writes, this.lost);
    expect(writes).toBe(this.writes);
    const failing = this.failNext;
    this.failNext = undefined;
    if (failing === 'not landed') throw new Error('connection lost');
    this.calls.push(`persist@${writes} ${change.tasks.map((t) => `${t.taskId}:${t.status}`).join(',')}`);
    ++this.writes;
    if (failing === 'landed') throw new Error('connection lost');
    return this.writes;
  }

  async rewrite(job: StoredJob & { writes: number }, fence: string): Promise<number> {
    this.fences.push(fence);
    const pending = job.queue.tasks.filter((t) => t.status === 'pending').map((t) => t.taskId);
    this.calls.push(`rewrite@${job.writes} pending ${pending.join(',')}`);
    this.lost = undefined;
    this.writes = job.writes + 1;
    return this.writes;
  }

  async publishTask(task: TaskMessage): Promise<void> {
    this.calls.push(`publish ${task.taskId}`);
  }

  publishEvent(event: { type: string }): void {
    this.calls.push(`event ${event.type}`);
  }

  async putRecord(): Promise<void> {}

  async purgeTasks(): Promise<void> {
    this.calls.push('purge');
  }
}

function driver(channels: RecordingChannels): JobDriver {
  const plan = planTasks(
    Array.from({ length: 4 }, (_, i) => ({ file: '/d/a.recordio', offset: i * 10, numRecords: 3 })),
    1,
  );
  const queue = TaskQueue.create({ jobId: 'job-a', runId: 'r', taskCount: plan.length, startedAt: 0 }, OPTIONS);
  return new JobDriver(SPEC, plan, queue, channels as unknown as JobChannels, OPTIONS, '7:master-a:abcdef', 3, 1);
}

describe('job driver', () => {
  test('job driver - a dispatch is persisted, under the term fence, before its task message goes out', async () => {
    const channels = new RecordingChannels();
    await driver(channels).tick(1);
    expect(channels.calls).toEqual(['persist@1 0:pending,1:pending', 'publish 0', 'publish 1']);
    expect(new Set(channels.fences)).toEqual(new Set(['7:master-a:abcdef']));
  });

  test('job driver - a write refused by the fence publishes nothing', async () => {
    const channels = new RecordingChannels();
    channels.refuse = true;
    await expect(driver(channels).tick(1)).rejects.toThrow(FencedWriteError);
    expect(channels.calls).toEqual([]);
  });

  test('job driver - when Redis lost writes it answered, the state in memory is written whole and the job goes on', async () => {
    const channels = new RecordingChannels();
    const d = driver(channels);
    await d.tick(1);
    // Redis comes back holding only the creation: the dispatch of tasks 0 and 1 is gone.
    channels.lost = 1;
    await d.tick(2);
    expect(channels.calls).toEqual([
      'persist@1 0:pending,1:pending',
      'publish 0',
      'publish 1',
      // The dispatch of task 2 found the count off; memory, with tasks 0-2 pending, was written.
      'rewrite@2 pending 0,1,2',
      'publish 2',
    ]);
    expect(d.stored()).toMatchObject({ writes: 3, writer: '7:master-a:abcdef', submitSeq: 3 });
    // The next write follows the rewrite's count.
    await d.tick(3);
    expect(channels.calls.at(-2)).toBe('persist@3 3:pending');
  });

  test.each(['landed', 'not landed'] as const)(
    'job driver - a transition whose write failed with its outcome unknown is announced once, when it stands (%s)',
    async (outcome) => {
      const channels = new RecordingChannels();
      const d = driver(channels);
      await d.tick(1);
      const before = d.stored();
      channels.failNext = outcome;
      await expect(d.stop('manual')).rejects.toThrow('connection lost');
      // Nothing is said of a stop that Redis may not hold.
      expect(channels.calls.filter((c) => c === 'purge' || c.startsWith('event'))).toEqual([]);
      const after = d.stored();
      channels.held =
        outcome === 'landed' ? { ...after, writes: channels.writes } : { ...before, writes: channels.writes };
      await d.idle();
      if (outcome === 'landed') {
        // Redis holds the stop: the re-read state is stopped, and the stop is announced now.
        expect(channels.calls.slice(-2)).toEqual(['purge', 'event stopped']);
        expect(await d.stop('manual')).toBe(false);
      } else {
        // Redis does not: the job runs, and the stop made again is announced then.
        expect(channels.calls.filter((c) => c === 'purge' || c.startsWith('event'))).toEqual([]);
        expect(await d.stop('manual')).toBe(true);
        expect(channels.calls.slice(-2)).toEqual(['purge', 'event stopped']);
      }
      expect(channels.calls.filter((c) => c === 'event stopped')).toHaveLength(1);
    },
  );
});
