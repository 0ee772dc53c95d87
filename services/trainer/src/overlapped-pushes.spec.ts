import type { Batch, Learner, PlainTensor } from '#libs/learner';
import { status as GrpcStatus } from '@grpc/grpc-js';
import {
  InvalidGradientError,
  PserverUnavailableError,
  ShardCallError,
  type PulledParams,
  type PushOutcome,
  type ShardedPushPullOptions,
  type StatusReply,
  type TensorLike,
} from '#libs/pserver-client';
import { oneShardStatus } from '../../../test/support/shard-status.js';
import { claimedTask as task, minibatchesOf } from '../../../test/support/training-loop-fakes.js';
import { TrainingLoop, type ParameterService } from './training-loop.js';

/*
 * `async` with `overlapPushes`: the next minibatch trains while the previous push is on its way,
 * and a task ends only once every one of its pushes was taken.
 */

const never = new AbortController().signal;

const readerOf = (batches: number) =>
  minibatchesOf(batches, (i) => ({ features: new Float32Array([i]), labels: new Int32Array([i]), size: 1 }));

/** Records the order of what the loop does, on the learner and on the parameter servers. */
class Journal {
  readonly events: string[] = [];
}

class JournalLearner implements Learner {
  constructor(private readonly journal: Journal) {}
  async initialize(): Promise<void> {}
  async getParams(): Promise<PlainTensor[]> {
    return [];
  }
  setParams(params: PlainTensor[]): void {
    this.journal.events.push(`load ${params[0]!.data[0]}`);
  }
  async train(batch: Batch): Promise<{ loss: number; samples: number }> {
    this.journal.events.push(`train ${batch.labels[0]}`);
    return { loss: 0, samples: batch.size };
  }
  async getUpdate(): Promise<PlainTensor[]> {
    return [{ name: 'w', dtype: 'float32', shape: [1], data: new Float32Array([0.5]) }];
  }
  async evaluate() {
    return { lossSum: 0, correct: 0, samples: 0 };
  }
  shutdown(): void {}
}

/**
 * An asynchronous shard: every push is a step and brings back the parameters it produced (whose
 * one value is the version). Each push waits until the test lets it through (`release`), unless
 * `autoRelease`; `failures` holds errors for the next pushes to fail with.
 */
class AsyncShard implements ParameterService {
  version = 3;
  autoRelease = true;
  readonly failures: Error[] = [];
  private readonly waiting: (() => void)[] = [];

  constructor(private readonly journal: Journal) {}

  async pullParams(): Promise<PulledParams> {
    this.journal.events.push(`pull ${this.version}`);
    return this.params();
  }

  async pushGradients(): Promise<PushOutcome> {
    throw new Error('not used: the loop push-pulls');
  }

  async pushPull(
    versions: number | readonly number[],
    _samples: number,
    _gradients: readonly TensorLike[],
    options: ShardedPushPullOptions,
  ): Promise<PushOutcome & { params?: PulledParams }> {
    const pushed = typeof versions === 'number' ? versions : versions[0]!;
    this.journal.events.push(`send ${pushed}`);
    // Written out at once; the answer may wait.
    options.onSent?.();
    if (!this.autoRelease) await new Promise<void>((resolve) => this.waiting.push(resolve));
    const failure = this.failures.shift();
    if (failure !== undefined) {
      this.journal.events.push(`failed ${pushed}`);
      throw failure;
    }
    this.version += 1;
    this.journal.events.push(`taken ${pushed}`);
    return { versions: [this.version], accepted: [true], stale: [], params: this.params() };
  }

  /** Lets the oldest waiting push through. */
  release(): void {
    this.waiting.shift()?.();
  }

  get pending(): number {
    return this.waiting.length;
  }

  async status(): Promise<StatusReply[]> {
    return oneShardStatus(this.version, 'async');
  }

  private params(): PulledParams {
    const tensors = [{ name: 'w', dtype: 'float32' as const, shape: [1], data: new Float32Array([this.version]) }];
    return { tensors, versions: [this.version], version: this.version, consistent: true };
  }
}

function setup(options: { retryBackoffMs?: number } = {}) {
  const journal = new Journal();
  const shard = new AsyncShard(journal);
  const counted: number[][] = [];
  const loop = new TrainingLoop(new JournalLearner(journal), shard, {
    mode: 'async',
    overlapPushes: true,
    maxGradientRetries: 0,
    onMinibatch: (_samples, versions) => counted.push([...versions]),
    ...options,
  });
  return { journal, shard, loop, counted };
}

function down(): ShardCallError {
  return new ShardCallError('pushPull', [
    new PserverUnavailableError('connection refused', 0, GrpcStatus.UNAVAILABLE, ''),
  ]);
}

/** Lets the event loop run until `done` holds. */
async function until(done: () => boolean): Promise<void> {
  for (let i = 0; i < 1_000 && !done(); i++) await new Promise((resolve) => setImmediate(resolve));
  if (!done()) throw new Error('the condition never held');
}

describe('overlapped pushes (async)', () => {
  it('overlapped pushes - the next minibatch trains while the previous push is on its way; its push is sent once that one is taken', async () => {
    const { journal, shard, loop, counted } = setup();
    shard.autoRelease = false;
    const batch = (i: number): Batch => ({ features: new Float32Array([i]), labels: new Int32Array([i]), size: 1 });
    await expect(loop.trainMinibatch(batch(0), never)).resolves.toBe('pushed');
    expect(journal.events).toEqual(['pull 3', 'load 3', 'train 0', 'send 3']);
    const second = loop.trainMinibatch(batch(1), never);
    await until(() => journal.events.includes('train 1'));
    // Minibatch 1 trained on version 3 while push 0 still waits; nothing more happens until it lands.
    expect(shard.pending).toBe(1);
    expect(journal.events.slice(4)).toEqual(['train 1']);
    shard.release();
    await expect(second).resolves.toBe('pushed');
    // Push 0 brought back version 4, loaded for minibatch 2; push 1 was computed on version 3.
    expect(journal.events.slice(4)).toEqual(['train 1', 'taken 3', 'load 4', 'send 3']);
    expect(counted).toEqual([[3]]);
    shard.release();
  });

  it('overlapped pushes - a task is done only once the push of its last minibatch was taken', async () => {
    const { journal, loop, counted } = setup();
    const outcome = await loop.runTask(task(3), readerOf(3), { stop: never, preempt: never });
    expect(outcome).toEqual({ kind: 'done', samples: 3 });
    expect(journal.events).toEqual([
      'pull 3',
      'load 3',
      'train 0',
      'send 3',
      // The shard takes push 0 while minibatch 1 trains; the loop loads its parameters after.
      'taken 3',
      'train 1',
      'load 4',
      'send 3',
      'taken 3',
      'train 2',
      'load 5',
      'send 4',
      'taken 4',
      'load 6',
    ]);
    expect(counted).toEqual([[3], [3], [4]]);
  });

  it('overlapped pushes - a push lost while its shard was away is computed again, then the minibatch after it', async () => {
    const { journal, shard, loop, counted } = setup({ retryBackoffMs: 1 });
    shard.failures.push(down());
    const outcome = await loop.runTask(task(2), readerOf(2), { stop: never, preempt: never });
    expect(outcome).toEqual({ kind: 'done', samples: 2 });
    expect(journal.events).toEqual([
      'pull 3',
      'load 3',
      'train 0',
      'send 3',
      'failed 3',
      'train 1',
      // Both minibatches again, in turn, on freshly pulled parameters.
      'pull 3',
      'load 3',
      'train 0',
      'send 3',
      'taken 3',
      'load 4',
      'train 1',
      'send 4',
      'taken 4',
      'load 5',
    ]);
    expect(counted).toEqual([[3], [4]]);
  });

  it('overlapped pushes - an error that does not pass by itself fails the task with the reason', async () => {
    const { shard, loop } = setup();
    shard.failures.push(
      new ShardCallError('pushPull', [
        new InvalidGradientError('gradient w has NaN', 0, GrpcStatus.INVALID_ARGUMENT, ''),
      ]),
    );
    const outcome = await loop.runTask(task(3), readerOf(3), { stop: never, preempt: never });
    expect(outcome).toMatchObject({ kind: 'failed', samples: 1, error: expect.stringMatching(/NaN/) });
  });

  it('overlapped pushes - preempted, the trainer sees the push on its way through before handing the task back', async () => {
    const { journal, shard, loop } = setup();
    const preempt = new AbortController();
    const push = shard.pushPull.bind(shard);
    shard.pushPull = async (v, n, g, o) => {
      if (!journal.events.some((e) => e.startsWith('send'))) preempt.abort();
      return push(v, n, g, o);
    };
    const outcome = await loop.runTask(task(5), readerOf(5), { stop: never, preempt: preempt.signal });
    expect(outcome).toEqual({ kind: 'returned', samples: 1 });
    expect(journal.events.at(-2)).toBe('taken 3');
  });

  it('overlapped pushes - a stopped job abandons the task without waiting for the push on its way', async () => {
    const { shard, loop } = setup();
    shard.autoRelease = false;
    const stop = new AbortController();
    const running = loop.runTask(task(3), readerOf(3), { stop: stop.signal, preempt: never });
    await until(() => shard.pending === 1);
    stop.abort();
    shard.release();
    await expect(running).resolves.toMatchObject({ kind: 'abandoned' });
  });
});
