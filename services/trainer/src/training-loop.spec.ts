import type { Batch, Learner, PlainTensor } from '#libs/learner';
import { status as GrpcStatus } from '@grpc/grpc-js';
import {
  InvalidGradientError,
  PserverTimeoutError,
  PserverUnavailableError,
  ShardCallError,
  StaleGradientError,
  type PulledParams,
  type PushOutcome,
  type StatusReply,
  type TensorLike,
} from '#libs/pserver-client';
import { oneShardStatus } from '../../../test/support/shard-status.js';
import { claimedTask as task, minibatchesOf } from '../../../test/support/training-loop-fakes.js';
import { GradientRetriesExhaustedError, PserverOutageError } from './errors.js';
import { TrainingLoop, type ParameterService } from './training-loop.js';

const BATCH: Batch = { features: new Float32Array([1, 2]), labels: new Int32Array([0]), size: 1 };

/** A learner that records what it is asked and whose update is a constant. */
class FakeLearner implements Learner {
  readonly calls: string[] = [];
  async initialize(): Promise<void> {}
  async getParams(): Promise<PlainTensor[]> {
    return [];
  }
  setParams(params: PlainTensor[]): void {
    this.calls.push(`setParams ${params[0]!.data[0]}`);
  }
  async train(batch: Batch): Promise<{ loss: number; samples: number }> {
    this.calls.push(`train ${batch.labels[0]}`);
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
 * One shard whose version is `version`; pushes at another version are refused as stale until
 * `staleRefusals` runs out, and each accepted push steps the version (a quorum of one).
 */
class FakePserver implements ParameterService {
  version = 3;
  staleRefusals = 0;
  pullTimeouts = 0;
  /** Calls (pull or push) that fail as if the shard were down. */
  unavailable = 0;
  /** Pushes that fail with an error that does not pass by itself. */
  invalid = 0;
  readonly pulls: (number | readonly number[])[] = [];
  readonly pushes: number[] = [];

  async pullParams(minVersion: number | readonly number[] = 0): Promise<PulledParams> {
    this.pulls.push(minVersion);
    if (this.unavailable > 0) {
      this.unavailable -= 1;
      throw down('pullParams');
    }
    const min = typeof minVersion === 'number' ? minVersion : minVersion[0]!;
    if (this.pullTimeouts > 0 || min > this.version) {
      this.pullTimeouts = Math.max(0, this.pullTimeouts - 1);
      throw new ShardCallError('pullParams', [new PserverTimeoutError('wait', 0, 4, 'wait-timeout')]);
    }
    const tensors = [{ name: 'w', dtype: 'float32' as const, shape: [1], data: new Float32Array([this.version]) }];
    return { tensors, versions: [this.version], version: this.version, consistent: true };
  }

  async pushGradients(versions: number | readonly number[], _samples: number): Promise<PushOutcome> {
    const pushed = typeof versions === 'number' ? versions : versions[0]!;
    this.pushes.push(pushed);
    if (this.unavailable > 0) {
      this.unavailable -= 1;
      throw down('pushGradients');
    }
    if (this.invalid > 0) {
      this.invalid -= 1;
      throw new ShardCallError('pushGradients', [new InvalidGradientError('bad', 0, GrpcStatus.INVALID_ARGUMENT, '')]);
    }
    if (pushed !== this.version) {
      const stale = new StaleGradientError('stale', 0, pushed, this.version);
      return { versions: [this.version], accepted: [false], stale: [stale] };
    }
    if (this.staleRefusals > 0) {
      this.staleRefusals -= 1;
      this.version += 1;
      const stale = new StaleGradientError('stale', 0, pushed, this.version);
      return { versions: [this.version], accepted: [false], stale: [stale] };
    }
    this.version += 1;
    return { versions: [this.version], accepted: [true], stale: [] };
  }

  async status(): Promise<StatusReply[]> {
    return oneShardStatus(this.version, 'sync');
  }
}

/** A `FakePserver` that keeps every update pushed to it. */
class RecordingPserver extends FakePserver {
  readonly updates: (readonly TensorLike[])[] = [];

  override async pushGradients(
    versions: number | readonly number[],
    samples: number,
    update: readonly TensorLike[] = [],
  ): Promise<PushOutcome> {
    this.updates.push(update);
    return super.pushGradients(versions, samples);
  }
}

/** A `FakePserver` whose pushes bring back the parameters they produce, as `pushPull` does. */
class PushPullPserver extends FakePserver {
  /** Push-pulls whose parameters do not come in time (pull them as usual). */
  withoutParams = 0;

  async pushPull(
    versions: number | readonly number[],
    samples: number,
  ): Promise<PushOutcome & { params?: PulledParams }> {
    const outcome = await this.pushGradients(versions, samples);
    if (outcome.stale.length > 0) return outcome;
    if (this.withoutParams > 0) {
      this.withoutParams -= 1;
      return outcome;
    }
    const tensors = [{ name: 'w', dtype: 'float32' as const, shape: [1], data: new Float32Array([this.version]) }];
    return { ...outcome, params: { tensors, versions: [this.version], version: this.version, consistent: true } };
  }
}

function down(operation: string): ShardCallError {
  return new ShardCallError(operation, [
    new PserverUnavailableError('connection refused', 0, GrpcStatus.UNAVAILABLE, ''),
  ]);
}

const never = new AbortController().signal;

const readerOf = (batches: number) => minibatchesOf(batches, (i) => ({ ...BATCH, labels: new Int32Array([i]) }));

describe('training loop', () => {
  it('training loop - a stale refusal refreshes the parameters and recomputes the same minibatch', async () => {
    const learner = new FakeLearner();
    const ps = new FakePserver();
    ps.staleRefusals = 2;
    const loop = new TrainingLoop(learner, ps, { mode: 'sync', maxGradientRetries: 2 });
    await expect(loop.trainMinibatch(BATCH, never)).resolves.toBe('pushed');
    expect(learner.calls).toEqual(['setParams 3', 'train 0', 'setParams 4', 'train 0', 'setParams 5', 'train 0']);
    expect(ps.pushes).toEqual([3, 4, 5]);
    expect(ps.pulls).toEqual([0, [4], [5]]);
  });

  it('training loop - the update is clipped to optimizer.clipNorm and clipValue before it is pushed', async () => {
    const learner = new FakeLearner();
    learner.getUpdate = async () => [
      { name: 'w', dtype: 'float32', shape: [2], data: Float32Array.of(30, -40) },
      { name: 'b', dtype: 'float32', shape: [1], data: Float32Array.of(0) },
    ];
    const ps = new RecordingPserver();
    const loop = new TrainingLoop(learner, ps, {
      mode: 'sync',
      maxGradientRetries: 0,
      clipping: { clipNorm: 10, clipValue: 7 },
    });
    await expect(loop.trainMinibatch(BATCH, never)).resolves.toBe('pushed');
    expect(ps.updates.map((u) => u.map((t) => Array.from(t.data as Float32Array)))).toEqual([[[6, -7], [0]]]);
  });

  it('training loop - parameters that come back with the push are loaded without a pull', async () => {
    const learner = new FakeLearner();
    const ps = new PushPullPserver();
    ps.withoutParams = 1;
    const loop = new TrainingLoop(learner, ps, { mode: 'sync', maxGradientRetries: 2 });
    for (let i = 0; i < 4; i++) await loop.trainMinibatch(BATCH, never);
    // The first step pulls, and its push brings no parameters back, so the second pulls too;
    // the rest come with their pushes.
    expect(ps.pulls).toEqual([0, [4]]);
    expect(ps.pushes).toEqual([3, 4, 5, 6]);
    expect(learner.calls).toEqual([
      'setParams 3',
      'train 0',
      'setParams 4',
      'train 0',
      'setParams 5',
      'train 0',
      'setParams 6',
      'train 0',
      'setParams 7',
    ]);
    expect(loop.versions).toEqual([7]);
  });

  it('training loop - more refusals than maxGradientRetries fail the minibatch', async () => {
    const ps = new FakePserver();
    ps.staleRefusals = 3;
    const loop = new TrainingLoop(new FakeLearner(), ps, { mode: 'sync', maxGradientRetries: 2 });
    const err = await loop.trainMinibatch(BATCH, never).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GradientRetriesExhaustedError);
    expect((err as GradientRetriesExhaustedError).refusals).toBe(3);
    expect(ps.pushes).toHaveLength(3);
  });

  it('training loop - maxGradientRetries 0 fails on the first refusal', async () => {
    const ps = new FakePserver();
    ps.staleRefusals = 1;
    const loop = new TrainingLoop(new FakeLearner(), ps, { mode: 'sync', maxGradientRetries: 0 });
    await expect(loop.trainMinibatch(BATCH, never)).rejects.toBeInstanceOf(GradientRetriesExhaustedError);
  });

  it('training loop - sync mode pulls the step its push was part of before the next minibatch', async () => {
    const learner = new FakeLearner();
    const ps = new FakePserver();
    const loop = new TrainingLoop(learner, ps, { mode: 'sync', maxGradientRetries: 1 });
    await loop.trainMinibatch(BATCH, never);
    await loop.trainMinibatch(BATCH, never);
    expect(ps.pulls).toEqual([0, [4]]);
    expect(ps.pushes).toEqual([3, 4]);
    expect(loop.versions).toEqual([4]);
  });

  it('training loop - parameters are pulled only when the held versions are older than needed', async () => {
    const learner = new FakeLearner();
    const ps = new FakePserver();
    const loop = new TrainingLoop(learner, ps, { mode: 'async', maxGradientRetries: 1 });
    await loop.trainMinibatch(BATCH, never);
    // Another trainer's push does not matter until this one pushes again: the next pull asks
    // for at least the version this push produced.
    ps.version += 5;
    await loop.trainMinibatch(BATCH, never);
    expect(ps.pulls).toEqual([0, [4]]);
    expect(learner.calls).toEqual(['setParams 3', 'train 0', 'setParams 9', 'train 0']);
  });

  it('training loop - a pull that times out waiting for the step is asked again', async () => {
    const ps = new FakePserver();
    ps.pullTimeouts = 2;
    const waits: string[] = [];
    const loop = new TrainingLoop(new FakeLearner(), ps, {
      mode: 'sync',
      maxGradientRetries: 0,
      onWait: (m) => waits.push(m),
    });
    await expect(loop.trainMinibatch(BATCH, never)).resolves.toBe('pushed');
    expect(ps.pulls).toHaveLength(3);
    expect(waits).toHaveLength(2);
  });

  it('training loop - preemption finishes the current minibatch and returns the task', async () => {
    const learner = new FakeLearner();
    const preempt = new AbortController();
    const ps = new FakePserver();
    const push = ps.pushGradients.bind(ps);
    ps.pushGradients = async (v, s) => {
      preempt.abort();
      return push(v, s);
    };
    const loop = new TrainingLoop(learner, ps, { mode: 'async', maxGradientRetries: 0 });
    const outcome = await loop.runTask(task(5), readerOf(5), { stop: never, preempt: preempt.signal });
    expect(outcome).toEqual({ kind: 'returned', samples: 1 });
    expect(ps.pushes).toHaveLength(1);
  });

  it('training loop - preemption during the last minibatch still ends the task done', async () => {
    const preempt = new AbortController();
    const ps = new FakePserver();
    const push = ps.pushGradients.bind(ps);
    ps.pushGradients = async (v, s) => {
      if (ps.pushes.length === 1) preempt.abort();
      return push(v, s);
    };
    const loop = new TrainingLoop(new FakeLearner(), ps, { mode: 'async', maxGradientRetries: 0 });
    const outcome = await loop.runTask(task(2), readerOf(2), { stop: never, preempt: preempt.signal });
    expect(outcome).toEqual({ kind: 'done', samples: 2 });
  });

  it('training loop - a stopped job abandons the task; a finished one is done', async () => {
    const ps = new FakePserver();
    const loop = new TrainingLoop(new FakeLearner(), ps, { mode: 'async', maxGradientRetries: 0 });
    await expect(loop.runTask(task(3), readerOf(3), { stop: never, preempt: never })).resolves.toEqual({
      kind: 'done',
      samples: 3,
    });
    const stop = new AbortController();
    stop.abort();
    await expect(loop.runTask(task(3), readerOf(3), { stop: stop.signal, preempt: never })).resolves.toEqual({
      kind: 'abandoned',
      samples: 0,
    });
  });

  it('training loop - a refused task fails with the reason', async () => {
    const ps = new FakePserver();
    ps.staleRefusals = 10;
    const loop = new TrainingLoop(new FakeLearner(), ps, { mode: 'sync', maxGradientRetries: 1 });
    const outcome = await loop.runTask(task(2), readerOf(2), { stop: never, preempt: never });
    expect(outcome).toMatchObject({ kind: 'failed', samples: 0, error: expect.stringMatching(/refused 2 times/) });
  });

  it('training loop - a parameter server briefly away is waited for, then the quorum is joined again', async () => {
    const learner = new FakeLearner();
    const ps = new FakePserver();
    const waits: string[] = [];
    let reconnects = 0;
    const loop = new TrainingLoop(learner, ps, {
      mode: 'sync',
      maxGradientRetries: 0,
      retryBackoffMs: 1,
      onWait: (m) => waits.push(m),
      onReconnect: () => {
        reconnects += 1;
      },
    });
    await loop.trainMinibatch(BATCH, never);
    // The next pull and the retried push fail as if the shard were restarting.
    ps.unavailable = 2;
    await expect(loop.trainMinibatch(BATCH, never)).resolves.toBe('pushed');
    expect(reconnects).toBe(1);
    expect(waits.filter((w) => w.includes('unavailable'))).toHaveLength(2);
    expect(ps.pushes).toEqual([3, 4]);
    // Not counted as refusals: maxGradientRetries is 0 and the minibatch still went through.
    expect(loop.versions).toEqual([4]);
  });

  it('training loop - a push that failed while a shard was away is recomputed on its current parameters', async () => {
    const learner = new FakeLearner();
    const ps = new FakePserver();
    const loop = new TrainingLoop(learner, ps, { mode: 'sync', maxGradientRetries: 0, retryBackoffMs: 1 });
    const push = ps.pushGradients.bind(ps);
    let first = true;
    ps.pushGradients = async (v, n) => {
      if (first) {
        first = false;
        ps.pushes.push(typeof v === 'number' ? v : v[0]!);
        throw down('pushGradients');
      }
      return push(v, n);
    };
    await expect(loop.trainMinibatch(BATCH, never)).resolves.toBe('pushed');
    expect(ps.pulls).toEqual([0, [0]]);
    expect(learner.calls).toEqual(['setParams 3', 'train 0', 'setParams 3', 'train 0']);
  });

  it('training loop - parameter servers away longer than the budget fail the minibatch', async () => {
    const ps = new FakePserver();
    ps.unavailable = 1_000;
    const loop = new TrainingLoop(new FakeLearner(), ps, {
      mode: 'sync',
      maxGradientRetries: 5,
      retryBackoffMs: 5,
      outageBudgetMs: 40,
    });
    const err = await loop.trainMinibatch(BATCH, never).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PserverOutageError);
    expect((err as PserverOutageError).cause).toBeInstanceOf(ShardCallError);
  });

  it('training loop - an error that does not pass by itself fails the minibatch at once', async () => {
    const ps = new FakePserver();
    ps.invalid = 1;
    const loop = new TrainingLoop(new FakeLearner(), ps, { mode: 'sync', maxGradientRetries: 5 });
    await expect(loop.trainMinibatch(BATCH, never)).rejects.toBeInstanceOf(ShardCallError);
    expect(ps.pushes).toHaveLength(1);
  });

  it('training loop - a shard back at an older version refuses the push and is followed down', async () => {
    const learner = new FakeLearner();
    const ps = new FakePserver();
    const waits: string[] = [];
    const loop = new TrainingLoop(learner, ps, { mode: 'sync', maxGradientRetries: 0, onWait: (m) => waits.push(m) });
    await loop.trainMinibatch(BATCH, never);
    // Restarted from a checkpoint at version 2 after the trainer pulled version 4.
    const push = ps.pushGradients.bind(ps);
    ps.pushGradients = async (v, n) => {
      if (ps.pushes.length === 1) ps.version = 2;
      return push(v, n);
    };
    await expect(loop.trainMinibatch(BATCH, never)).resolves.toBe('pushed');
    expect(ps.pushes).toEqual([3, 4, 2]);
    expect(ps.pulls).toEqual([0, [4], [2]]);
    expect(loop.versions).toEqual([2]);
    expect(waits.some((w) => /went back to version\(s\) 2/.test(w))).toBe(true);
  });

  it('training loop - a pull waiting for a step a restarted shard will never take follows the shard down', async () => {
    const learner = new FakeLearner();
    const ps = new FakePserver();
    const loop = new TrainingLoop(learner, ps, { mode: 'sync', maxGradientRetries: 0, onWait: () => undefined });
    await loop.trainMinibatch(BATCH, never);
    await loop.trainMinibatch(BATCH, never);
    // The trainer now needs version 5; the shard restarted at version 1.
    ps.version = 1;
    await expect(loop.trainMinibatch(BATCH, never)).resolves.toBe('pushed');
    expect(ps.pulls).toEqual([0, [4], [5], [1]]);
    expect(ps.pushes.at(-1)).toBe(1);
  });

  it('training loop - a task whose shard is away until preemption is handed back', async () => {
    const preempt = new AbortController();
    const ps = new FakePserver();
    ps.unavailable = 1_000;
    const loop = new TrainingLoop(new FakeLearner(), ps, {
      mode: 'sync',
      maxGradientRetries: 0,
      retryBackoffMs: 1,
      onWait: () => preempt.abort(),
    });
    await expect(loop.runTask(task(3), readerOf(3), { stop: never, preempt: preempt.signal })).resolves.toEqual({
      kind: 'returned',
      samples: 0,
    });
  });
});
