import * as tf from '@tensorflow/tfjs';
import type { Learner } from '#libs/learner';
import {
  StaleGradientError,
  type PulledParams,
  type PushOutcome,
  type StatusReply,
  type TensorLike,
} from '#libs/pserver-client';
import { oneShardStatus } from '../../../test/support/shard-status.js';
import { ONE_EXAMPLE, ScalarLearner, claimedTask, minibatchesOf } from '../../../test/support/training-loop-fakes.js';
import { elasticExchange } from './elastic-averaging.js';
import { learnerOptions } from './learner-options.js';
import { TrainingLoop, type ParameterService, type TrainingLoopOptions } from './training-loop.js';

/*
 * The trainer side of each training mode: which versions it pushes for, what it pulls, what a
 * stale refusal costs, and how local rounds and elastic averaging go.
 */

const BATCH = ONE_EXAMPLE;
const never = new AbortController().signal;

/**
 * One shard at `version` whose parameter is the version itself. A push for the version steps it
 * (a quorum of one) unless `stepping` is off; one up to `maxAhead` later is taken without a step; any other is refused as
 * stale, as are the first `staleRefusals` (the step went on without it). A pull for a version the
 * shard has not reached gets it at once (the other trainers caught up).
 */
class ScriptedPserver implements ParameterService {
  version = 3;
  maxAhead = 0;
  /** Off: pushes never step the shard (the other trainers are slow). */
  stepping = true;
  staleRefusals = 0;
  readonly pulls: number[] = [];
  readonly pushes: { version: number; samples: number; value: number }[] = [];

  async pullParams(minVersion: number | readonly number[] = 0): Promise<PulledParams> {
    const min = typeof minVersion === 'number' ? minVersion : minVersion[0]!;
    this.pulls.push(min);
    this.version = Math.max(this.version, min);
    const tensors = [{ name: 'w', dtype: 'float32' as const, shape: [1], data: Float32Array.of(this.version) }];
    return { tensors, versions: [this.version], version: this.version, consistent: true };
  }

  async pushGradients(
    versions: number | readonly number[],
    samples: number,
    update: readonly TensorLike[],
  ): Promise<PushOutcome> {
    const pushed = typeof versions === 'number' ? versions : versions[0]!;
    this.pushes.push({ version: pushed, samples, value: (update[0]!.data as Float32Array)[0]! });
    const stale = () => ({
      versions: [this.version],
      accepted: [false],
      stale: [new StaleGradientError('stale', 0, pushed, this.version)],
    });
    if (this.staleRefusals > 0) {
      this.staleRefusals -= 1;
      this.version += 1;
      return stale();
    }
    if (pushed < this.version || pushed > this.version + this.maxAhead) return stale();
    if (this.stepping && pushed === this.version) this.version += 1;
    return { versions: [this.version], accepted: [true], stale: [] };
  }

  async status(): Promise<StatusReply[]> {
    return oneShardStatus(this.version, '');
  }
}

/**
 * Two shards at `versions`, each as `ScriptedPserver` is alone: a push for a shard's version
 * steps it, an older one is refused as stale with the shard's version; a pull gets each shard at
 * the version asked for at least.
 */
class TwoShards implements ParameterService {
  versions = [3, 3];
  readonly pulls: number[][] = [];
  readonly pushes: number[][] = [];

  async pullParams(minVersion: number | readonly number[] = 0): Promise<PulledParams> {
    const min = typeof minVersion === 'number' ? [minVersion, minVersion] : [...minVersion];
    this.pulls.push(min);
    this.versions = this.versions.map((v, k) => Math.max(v, min[k]!));
    const tensors = [{ name: 'w', dtype: 'float32' as const, shape: [1], data: Float32Array.of(this.versions[0]!) }];
    return { tensors, versions: [...this.versions], version: Math.min(...this.versions), consistent: true };
  }

  async pushGradients(versions: number | readonly number[]): Promise<PushOutcome> {
    const pushed = typeof versions === 'number' ? [versions, versions] : [...versions];
    this.pushes.push(pushed);
    const stale = pushed.flatMap((v, k) =>
      v < this.versions[k]! ? [new StaleGradientError('stale', k, v, this.versions[k]!)] : [],
    );
    this.versions = this.versions.map((v, k) => (pushed[k] === v ? v + 1 : v));
    return { versions: [...this.versions], accepted: pushed.map((_, k) => !stale.some((e) => e.shard === k)), stale };
  }

  async status(): Promise<StatusReply[]> {
    return this.versions.flatMap((v, k) => oneShardStatus(v, '').map((reply) => ({ ...reply, shard: k })));
  }
}

function loopOf(learner: Learner, ps: ParameterService, options: Partial<TrainingLoopOptions>, counted: number[] = []) {
  return new TrainingLoop(learner, ps, {
    mode: 'sync',
    maxGradientRetries: 0,
    onMinibatch: (samples) => counted.push(samples),
    ...options,
  });
}

describe('training modes on a trainer', () => {
  it('sync with backupTrainers - a late gradient is dropped, the minibatch counts as done, the next one uses fresh parameters', async () => {
    const learner = new ScalarLearner();
    const ps = new ScriptedPserver();
    ps.staleRefusals = 1;
    const counted: number[] = [];
    const loop = loopOf(learner, ps, { backupTrainers: 1 }, counted);
    await expect(loop.trainMinibatch(BATCH, never)).resolves.toBe('pushed');
    expect(counted).toEqual([1]);
    await loop.trainMinibatch(BATCH, never);
    expect(ps.pushes.map((p) => p.version)).toEqual([3, 4]);
    expect(ps.pulls).toEqual([0, 4]);
    expect(learner.calls).toEqual(['set 3', 'train', 'update', 'set 4', 'train', 'update']);
  });

  it('sync without backupTrainers - the same refusal is recomputed (and with no retries left, fails)', async () => {
    const ps = new ScriptedPserver();
    ps.staleRefusals = 1;
    await expect(loopOf(new ScalarLearner(), ps, {}).trainMinibatch(BATCH, never)).rejects.toThrow(/refused 1 times/);
  });

  it('ssp - the trainer pushes for its own clock, up to maxStaleness versions past its parameters, then waits for newer ones', async () => {
    const ps = new ScriptedPserver();
    ps.maxAhead = 2;
    ps.stepping = false;
    const loop = loopOf(new ScalarLearner(), ps, { mode: 'ssp', maxStaleness: 2 });
    for (let i = 0; i < 5; i++) await loop.trainMinibatch(BATCH, never);
    expect(ps.pushes.map((p) => p.version)).toEqual([3, 4, 5, 6, 7]);
    // Pushing for 6 needs parameters of version 4 at least, for 7 of version 5.
    expect(ps.pulls).toEqual([0, 4, 5]);
  });

  it('ssp with maxStaleness 0 - pulls the step of every push before the next, as sync', async () => {
    const ps = new ScriptedPserver();
    const loop = loopOf(new ScalarLearner(), ps, { mode: 'ssp', maxStaleness: 0 });
    for (let i = 0; i < 3; i++) await loop.trainMinibatch(BATCH, never);
    expect(ps.pushes.map((p) => p.version)).toEqual([3, 4, 5]);
    expect(ps.pulls).toEqual([0, 4, 5]);
  });

  it('local - localSteps minibatches per push of the delta; each round starts from the servers; the task end pushes the rest', async () => {
    const learner = new ScalarLearner();
    const ps = new ScriptedPserver();
    const counted: number[] = [];
    const loop = loopOf(learner, ps, { mode: 'local', localSteps: 3, localSync: true }, counted);
    const outcome = await loop.runTask(claimedTask(), minibatchesOf(7), { stop: never, preempt: never });
    expect(outcome).toEqual({ kind: 'done', samples: 7 });
    expect(ps.pushes).toEqual([
      { version: 3, samples: 3, value: -3 },
      { version: 4, samples: 3, value: -3 },
      { version: 5, samples: 1, value: -1 },
    ]);
    expect(ps.pulls).toEqual([0, 4, 5]);
    expect(counted).toEqual([1, 1, 1, 1, 1, 1, 1]);
    expect(learner.calls.filter((c) => c.startsWith('set'))).toEqual(['set 3', 'set 4', 'set 5']);
  });

  it('local with roundEnd first - a round another trainer finished ends after the step on hand; notices of other rounds change nothing', async () => {
    const ps = new ScriptedPserver();
    const loop = loopOf(new ScalarLearner(), ps, { mode: 'local', localSteps: 4, localSync: true, roundEnd: 'first' });
    await loop.trainMinibatch(BATCH, never);
    await loop.trainMinibatch(BATCH, never);
    loop.roundWaiting(0, 3);
    await loop.trainMinibatch(BATCH, never);
    expect(ps.pushes).toEqual([{ version: 3, samples: 3, value: -3 }]);
    // The round on 4: the notice of round 3 again (late), then one of another shard.
    loop.roundWaiting(0, 3);
    for (let i = 0; i < 3; i++) await loop.trainMinibatch(BATCH, never);
    loop.roundWaiting(1, 4);
    await loop.trainMinibatch(BATCH, never);
    expect(ps.pushes.at(-1)).toEqual({ version: 4, samples: 4, value: -4 });
    // Told before the round's first step: it ends after that step.
    loop.roundWaiting(0, 5);
    await loop.trainMinibatch(BATCH, never);
    expect(ps.pushes.at(-1)).toEqual({ version: 5, samples: 1, value: -1 });
    // With roundEnd steps, the default, a notice is of no consequence.
    const plain = new ScriptedPserver();
    const steps = loopOf(new ScalarLearner(), plain, { mode: 'local', localSteps: 2, localSync: true });
    steps.roundWaiting(0, 3);
    await steps.trainMinibatch(BATCH, never);
    expect(plain.pushes).toEqual([]);
    await steps.trainMinibatch(BATCH, never);
    expect(plain.pushes).toEqual([{ version: 3, samples: 2, value: -2 }]);
  });

  it('local - a delta refused as stale is dropped, not recomputed, and its minibatches count as done', async () => {
    const learner = new ScalarLearner();
    const ps = new ScriptedPserver();
    ps.staleRefusals = 1;
    const loop = loopOf(learner, ps, { mode: 'local', localSteps: 2, localSync: true });
    const outcome = await loop.runTask(claimedTask(), minibatchesOf(4), { stop: never, preempt: never });
    expect(outcome).toEqual({ kind: 'done', samples: 4 });
    expect(ps.pushes.map((p) => p.version)).toEqual([3, 4]);
    expect(learner.calls.filter((c) => c === 'train')).toHaveLength(4);
  });

  it("sync - after joining the quorum again the next minibatch trains on the shards' versions, not on the parameters held from before", async () => {
    const learner = new ScalarLearner();
    const ps = new TwoShards();
    const loop = loopOf(learner, ps, {});
    await loop.trainMinibatch(BATCH, never);
    // It left the quorum, the others trained on; it joins again with the shards at 9 and 8
    // (they step apart), and asks each for its own version, which it has already.
    ps.versions = [9, 8];
    loop.joined([9, 8]);
    await loop.trainMinibatch(BATCH, never);
    expect(ps.pushes).toEqual([
      [3, 3],
      [9, 8],
    ]);
    expect(ps.pulls).toEqual([
      [0, 0],
      [9, 8],
    ]);
  });

  it('local - a preempted task still pushes the steps it took before it is handed back', async () => {
    const ps = new ScriptedPserver();
    const preempt = new AbortController();
    const loop = loopOf(new ScalarLearner(), ps, {
      mode: 'local',
      localSteps: 5,
      onMinibatch: () => preempt.abort(),
    });
    const outcome = await loop.runTask(claimedTask(), minibatchesOf(4), { stop: never, preempt: preempt.signal });
    expect(outcome).toEqual({ kind: 'returned', samples: 1 });
    expect(ps.pushes).toEqual([{ version: 3, samples: 1, value: -1 }]);
  });

  it('local with elasticAlpha - the trainer keeps its copy, pulls the center at each round end and moves toward it', async () => {
    const learner = new ScalarLearner();
    const ps = new ScriptedPserver();
    const loop = loopOf(learner, ps, { mode: 'local', localSteps: 2, localSync: false, elasticAlpha: 0.5 });
    for (let i = 0; i < 4; i++) await loop.trainMinibatch(BATCH, never);
    // Round 1: from the center 3, two steps to 1; e = 0.5 (1 - 3) = -1; the worker moves to 2.
    // Round 2: two steps to 0; the center is now 4 (the push stepped it): e = -2, worker at 2.
    expect(ps.pushes).toEqual([
      { version: 3, samples: 2, value: -1 },
      { version: 4, samples: 2, value: -2 },
    ]);
    expect(learner.x).toBe(2);
    expect(learner.calls.filter((c) => c.startsWith('set'))).toEqual(['set 3', 'set 2', 'set 2']);
  });

  it('elastic averaging - worker and center each move alpha of the way toward the other', () => {
    const { difference, moved } = elasticExchange(
      [{ name: 'w', dtype: 'float32', shape: [2], data: Float32Array.of(4, -2) }],
      [{ name: 'w', dtype: 'float32', shape: [2], data: Float32Array.of(0, 2) }],
      0.25,
    );
    expect(Array.from(difference[0]!.data)).toEqual([1, -1]);
    expect(Array.from(moved[0]!.data)).toEqual([3, -1]);
    expect(() =>
      elasticExchange(
        [{ name: 'w', dtype: 'float32', shape: [1], data: Float32Array.of(1) }],
        [{ name: 'b', dtype: 'float32', shape: [1], data: Float32Array.of(1) }],
        0.5,
      ),
    ).toThrow(/no parameter matching w/);
  });

  it('learner options - local mode learns deltas with the job optimizer at its learning rate, the others gradients', () => {
    const optimizer = { type: 'sgd', learningRate: 0.3, weightDecay: 0 } as const;
    const local = learnerOptions({ training: { mode: 'local' } as never, optimizer });
    expect(local).toMatchObject({ mode: 'delta', localLearningRate: 0.3 });
    // Plain SGD is the learner's own step, but for our kernel on the wasm backend's heap.
    expect(local.localOptimizer?.()?.path).toBe(tf.getBackend() === 'wasm' ? 'wasm-simd' : undefined);
    const adam = {
      type: 'adam',
      learningRate: 0.002,
      beta1: 0.9,
      beta2: 0.999,
      epsilon: 1e-7,
      weightDecay: 0,
    } as const;
    const made = learnerOptions({ training: { mode: 'local' } as never, optimizer: adam }).localOptimizer?.();
    // TF.js's Adam on the backend these tests run on; our kernel on the wasm backend's heap.
    expect(made?.path).toBe(tf.getBackend() === 'wasm' ? 'wasm-simd' : 'tfjs');
    made?.dispose();
    expect(learnerOptions({ training: { mode: 'ssp' } as never, optimizer })).toEqual({ mode: 'gradient' });
  });
});
