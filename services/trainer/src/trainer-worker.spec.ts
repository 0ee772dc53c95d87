import type { JobSpec } from '#libs/job-spec';
import type { EventSubscription, JobChange, JobWatch } from '#libs/master-client';
import type { JobEvent, JobRecord } from '#libs/messaging';
import { JobSetupError } from './errors.js';
import { JobRecordsView } from './job-records-view.js';
import type { JobRunEnd } from './job-trainer.js';
import type { TaskSignals } from './training-loop.js';
import { TrainerWorker } from './trainer-worker.js';

/** An async iterable fed by hand. */
class Feed<T> implements AsyncIterable<T> {
  private readonly items: T[] = [];
  private wake: (() => void) | undefined;
  private ended = false;

  push(item: T): void {
    this.items.push(item);
    this.wake?.();
  }

  stop(): void {
    this.ended = true;
    this.wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    for (;;) {
      while (this.items.length > 0) yield this.items.shift()!;
      if (this.ended) return;
      await new Promise<void>((resolve) => (this.wake = resolve));
    }
  }
}

const SILENT = { log: () => undefined, warn: () => undefined, error: () => undefined };

function spec(id: string): JobSpec {
  return {
    id,
    dataset: {
      train: ['data/train-*.recordio'],
      eval: ['data/eval-*.recordio'],
      layout: { featureShape: [4], featureDtype: 'float32', labelDtype: 'int32', numClasses: 3 },
    },
    model: { preset: 'mlp' },
    optimizer: { type: 'sgd', learningRate: 0.1 },
    training: { batchSize: 16 },
    stop: { maxEpochs: 1 },
    output: `out/${id}`,
  } as unknown as JobSpec;
}

function record(id: string, startedAt: string): JobRecord {
  return { jobId: id, state: 'running', spec: spec(id), epoch: 0, startedAt };
}

function setup(run: (spec: JobSpec, signals: TaskSignals) => Promise<JobRunEnd>) {
  const watch = new Feed<JobChange>();
  const view = new JobRecordsView(watch as unknown as JobWatch);
  const events = new Map<string, Feed<JobEvent>>();
  const faults: { jobId: string; error: string }[] = [];
  const worker = new TrainerWorker({
    jobRecords: view,
    jobTrainer: { run },
    events: (jobId) => {
      const feed = new Feed<JobEvent>();
      events.set(jobId, feed);
      return feed as unknown as EventSubscription;
    },
    reportFault: async (r, error) => faults.push({ jobId: r.jobId, error }),
    logger: SILENT,
    setupRetryMs: 60_000,
  });
  const put = (r: JobRecord) => watch.push({ jobId: r.jobId, record: r, initial: false, revision: 1 });
  return { worker, view, events, faults, put };
}

/** Resolves when `check` holds, polling briefly. */
async function until(check: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !check(); i++) await new Promise((r) => setTimeout(r, 5));
  expect(check()).toBe(true);
}

describe('trainer worker', () => {
  test('trainer worker - a refused submission of the same id leaves the job it serves running', async () => {
    let stop: AbortSignal | undefined;
    const { worker, view, events, put } = setup(async (_spec, signals) => {
      stop = signals.stop;
      await new Promise((resolve) => signals.stop.addEventListener('abort', resolve, { once: true }));
      return 'stopped';
    });
    put(record('job-a', '2026-01-01T00:00:00.000Z'));
    worker.start();
    await until(() => stop !== undefined && events.has('job-a'));
    const at = new Date().toISOString();
    events.get('job-a')!.push({ type: 'failed', jobId: 'job-a', at, error: 'invalid job spec', refused: true });
    await new Promise((r) => setTimeout(r, 50));
    expect(stop!.aborted).toBe(false);
    // The master's own failure of the accepted job ends it.
    events.get('job-a')!.push({ type: 'failed', jobId: 'job-a', at, error: '3 attempts to run it failed' });
    await until(() => stop!.aborted);
    await worker.stop();
    view.stop();
  });

  test('trainer worker - a job whose model cannot be built is reported, and the next job is served', async () => {
    const served: string[] = [];
    const { worker, view, faults, put } = setup(async (s, signals) => {
      served.push(s.id);
      if (s.id === 'bad') throw new JobSetupError('bad', { cause: new RangeError('Invalid typed array length') });
      await new Promise((resolve) => signals.preempt.addEventListener('abort', resolve, { once: true }));
      return 'preempted';
    });
    put(record('bad', '2026-01-01T00:00:00.000Z'));
    put(record('good', '2026-01-01T00:00:01.000Z'));
    worker.start();
    await until(() => served.includes('good'));
    expect(served).toEqual(['bad', 'good']);
    expect(faults).toEqual([{ jobId: 'bad', error: 'job bad: the model cannot be built: Invalid typed array length' }]);
    expect(worker.hasOtherJob('good')).toBe(false);
    await worker.stop();
    view.stop();
  });
});
