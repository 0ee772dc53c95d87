import { status as GrpcStatus } from '@grpc/grpc-js';
import {
  PserverUnavailableError,
  ShardCallError,
  StaleGradientError,
  type PulledParams,
  type PushOutcome,
  type ShardedPushPullOptions,
  type StatusReply,
  type TensorLike,
} from '#libs/pserver-client';
import { oneShardStatus } from '../../../test/support/shard-status.js';
import { ScalarLearner, claimedTask, minibatchesOf } from '../../../test/support/training-loop-fakes.js';
import { TrainingLoop, type RoundLanding, type TaskOutcome, type TrainingLoopOptions } from './training-loop.js';

/*
 * `local` with `overlapRounds`: the next round trains while the last round's delta is on its
 * way; its average lands as soon as it is back (at the next round's end at the latest), with the
 * steps taken meanwhile carried onto it.
 */

const never = new AbortController().signal;

/**
 * One shard in rounds, with `others` more trainers whose deltas are each `othersDelta`: a push for
 * its version closes the round, adds the mean delta to the parameter and answers with the next
 * version's parameters; any other version is refused as stale. `failures` holds errors for the
 * next pushes to fail with (before the shard sees them); `staleRefusals` refuses that many first.
 */
class RoundShard {
  version = 3;
  value = 3;
  others = 0;
  othersDelta = 0;
  staleRefusals = 0;
  /**
   * Turns of the event loop before a push is answered: one answers while the next step trains
   * (the loop lands it before the step after), many only after the loop came to wait for it.
   */
  answerTurns = 1;
  readonly failures: Error[] = [];
  readonly pushes: { version: number; samples: number; delta: number }[] = [];

  constructor(private readonly journal: string[]) {}

  async pullParams(): Promise<PulledParams> {
    this.journal.push(`pull ${this.version}`);
    return this.params();
  }

  async pushGradients(): Promise<PushOutcome> {
    throw new Error('not used: the loop push-pulls');
  }

  async pushPull(
    versions: number | readonly number[],
    samples: number,
    update: readonly TensorLike[],
    options: ShardedPushPullOptions,
  ): Promise<PushOutcome & { params?: PulledParams }> {
    const pushed = typeof versions === 'number' ? versions : versions[0]!;
    const delta = (update[0]!.data as Float32Array)[0]!;
    this.journal.push(`send ${pushed} ${delta}`);
    options.onSent?.();
    // The answer comes after the loop went on.
    for (let turn = 0; turn < this.answerTurns; turn++) await new Promise((resolve) => setImmediate(resolve));
    const failure = this.failures.shift();
    if (failure !== undefined) throw failure;
    if (this.staleRefusals > 0 || pushed !== this.version) {
      if (this.staleRefusals > 0) {
        this.staleRefusals -= 1;
        // The round closed without this trainer.
        this.value += this.othersDelta;
        this.version += 1;
      }
      return {
        versions: [this.version],
        accepted: [false],
        stale: [new StaleGradientError('stale', 0, pushed, this.version)],
      };
    }
    this.pushes.push({ version: pushed, samples, delta });
    this.value += (delta + this.others * this.othersDelta) / (1 + this.others);
    this.version += 1;
    return { versions: [this.version], accepted: [true], stale: [], params: this.params() };
  }

  async status(): Promise<StatusReply[]> {
    return oneShardStatus(this.version, 'local');
  }

  private params(): PulledParams {
    const tensors = [{ name: 'w', dtype: 'float32' as const, shape: [1], data: Float32Array.of(this.value) }];
    return { tensors, versions: [this.version], version: this.version, consistent: true };
  }
}

/** What the learner and the shard did, in order, without the learner's `update` calls. */
function doneIn(journal: string[]): string[] {
  return journal.filter((entry) => entry !== 'update');
}

/** What became of a done task's last round. */
function landingOf(outcome: TaskOutcome): Promise<RoundLanding> {
  if (outcome.kind !== 'done' || outcome.landing === undefined) throw new Error(`no round on its way: ${outcome.kind}`);
  return outcome.landing;
}

function setup(options: Partial<TrainingLoopOptions> = {}) {
  const journal: string[] = [];
  const learner = new ScalarLearner(journal);
  const shard = new RoundShard(journal);
  const counted: number[] = [];
  const loop = new TrainingLoop(learner, shard, {
    mode: 'local',
    localSteps: 2,
    localSync: true,
    overlapRounds: true,
    maxGradientRetries: 0,
    retryBackoffMs: 1,
    onMinibatch: (samples) => counted.push(samples),
    ...options,
  });
  return { journal, learner, shard, loop, counted };
}

describe('overlapped local rounds', () => {
  it.each([
    {
      when: 'as soon as it is answered, between two steps, with the steps taken since',
      answerTurns: 1,
      rounds: [
        // Round two trains while round one is on its way.
        'train',
        // Round one, answered meanwhile, lands before round two's next step: its average
        // (3 + (-2 - 4) / 2 = 0) with the step taken since on it.
        'set -1',
        'train',
        // Round two's delta is both its steps, from the average.
        'send 4 -2',
        'train',
        'set -4',
        'train',
      ],
    },
    {
      when: "at the next round's end when the answer comes after its last step, with that round's steps",
      answerTurns: 100,
      rounds: [
        'train',
        'train',
        // Round one's average (3 + (-2 - 4) / 2 = 0) with round two's two steps on it.
        'set -2',
        'send 4 -2',
        'train',
        'train',
        'set -5',
      ],
    },
  ])(
    'overlapped rounds - the next round trains while the last one is on its way, which lands $when carried onto its average',
    async ({ answerTurns, rounds }) => {
      const { journal, learner, shard, loop, counted } = setup();
      shard.others = 1;
      shard.othersDelta = -4;
      shard.answerTurns = answerTurns;
      const outcome = await loop.runTask(claimedTask(), minibatchesOf(6), { stop: never, preempt: never });
      expect(outcome).toEqual({ kind: 'done', samples: 6, landing: expect.any(Promise) });
      // The task's last round stays on its way for the next task; with none, it is landed here.
      expect(doneIn(journal).at(-1)).toBe('send 5 -2');
      expect(await loop.landRounds(never)).toBe('pushed');
      expect(await landingOf(outcome)).toEqual({ kind: 'landed' });
      expect(doneIn(journal)).toEqual([
        'pull 3',
        'set 3',
        'train',
        'train',
        'send 3 -2',
        ...rounds,
        'send 5 -2',
        // The last round landed, with no steps to carry.
        'set -6',
      ]);
      expect(shard.pushes.map((p) => [p.version, p.samples])).toEqual([
        [3, 2],
        [4, 2],
        [5, 2],
      ]);
      expect(counted).toEqual([1, 1, 1, 1, 1, 1]);
      expect(learner.x).toBe(shard.value);
    },
  );

  it('overlapped rounds - alone, a trainer ends a task with the parameters plain rounds give it', async () => {
    const overlapped = setup();
    const plain = setup({ overlapRounds: false });
    await overlapped.loop.runTask(claimedTask(), minibatchesOf(7), { stop: never, preempt: never });
    await overlapped.loop.landRounds(never);
    await plain.loop.runTask(claimedTask(), minibatchesOf(7), { stop: never, preempt: never });
    expect(overlapped.shard.value).toBe(plain.shard.value);
    expect(overlapped.learner.x).toBe(plain.learner.x);
    expect(overlapped.shard.pushes.map((p) => p.samples)).toEqual([2, 2, 2, 1]);
    expect(plain.shard.pushes.map((p) => p.samples)).toEqual([2, 2, 2, 1]);
  });

  it("overlapped rounds - a round refused as stale is dropped; the steps since go onto the servers' parameters", async () => {
    const { journal, learner, shard, loop } = setup();
    shard.staleRefusals = 1;
    shard.othersDelta = -10;
    const outcome = await loop.runTask(claimedTask(), minibatchesOf(4), { stop: never, preempt: never });
    await loop.landRounds(never);
    expect(await landingOf(outcome)).toEqual({ kind: 'landed' });
    // Round one (for version 3) was refused: the round closed without it at 3 - 10 = -7, where
    // the step taken since goes.
    expect(doneIn(journal).slice(5)).toEqual(['train', 'pull 4', 'set -8', 'train', 'send 4 -2', 'set -9']);
    expect(shard.pushes.map((p) => p.version)).toEqual([4]);
    expect(learner.x).toBe(-9);
  });

  it('overlapped rounds - a shard away when the round lands is waited for, then its parameters are pulled', async () => {
    const { journal, shard, loop } = setup();
    shard.failures.push(
      new ShardCallError('pushPull', [
        new PserverUnavailableError('connection refused', 0, GrpcStatus.UNAVAILABLE, ''),
      ]),
    );
    const outcome = await loop.runTask(claimedTask(), minibatchesOf(4), { stop: never, preempt: never });
    await loop.landRounds(never);
    expect(await landingOf(outcome)).toEqual({ kind: 'landed' });
    // The first round may or may not have been taken: the shard's parameters are taken as they are.
    expect(doneIn(journal).slice(5)).toEqual(['train', 'pull 3', 'set 2', 'train', 'send 3 -2', 'set 1']);
  });

  it('overlapped rounds - a preempted task lands the round on its way and pushes the steps it took before it is handed back', async () => {
    const preempt = new AbortController();
    let steps = 0;
    const { shard, loop, learner } = setup({
      onMinibatch: () => {
        steps += 1;
        if (steps === 3) preempt.abort();
      },
    });
    const outcome = await loop.runTask(claimedTask(), minibatchesOf(6), { stop: never, preempt: preempt.signal });
    expect(outcome).toEqual({ kind: 'returned', samples: 3 });
    expect(shard.pushes.map((p) => [p.version, p.samples, p.delta])).toEqual([
      [3, 2, -2],
      [4, 1, -1],
    ]);
    expect(learner.x).toBe(shard.value);
  });
  it('overlapped rounds - rounds go on across tasks: the next task trains while the last one lands, and the task before is done only then', async () => {
    const { journal, learner, shard, loop } = setup();
    shard.others = 1;
    shard.othersDelta = -4;
    const first = await loop.runTask(claimedTask(), minibatchesOf(2), { stop: never, preempt: never });
    let landed: RoundLanding | undefined;
    void landingOf(first).then((l) => (landed = l));
    expect(doneIn(journal)).toEqual(['pull 3', 'set 3', 'train', 'train', 'send 3 -2']);
    const second = await loop.runTask(claimedTask(), minibatchesOf(3), { stop: never, preempt: never });
    expect(landed).toEqual({ kind: 'landed' });
    expect(doneIn(journal).slice(5)).toEqual([
      // The second task trains on the first one's parameters, with no pull between the tasks.
      'train',
      // The first task's round lands here: its average (3 + (-2 - 4) / 2 = 0) plus one step.
      'set -1',
      'train',
      'send 4 -2',
      'train',
      // The second task's first round: 0 + (-2 - 4) / 2 = -3, plus its last step.
      'set -4',
      'send 5 -1',
    ]);
    await loop.landRounds(never);
    expect(await landingOf(second)).toEqual({ kind: 'landed' });
    expect(shard.pushes.map((p) => [p.version, p.samples])).toEqual([
      [3, 2],
      [4, 2],
      [5, 1],
    ]);
    expect(learner.x).toBe(shard.value);
  });

  it('overlapped rounds - alone across tasks, a trainer ends with the parameters plain rounds give it', async () => {
    const overlapped = setup();
    const plain = setup({ overlapRounds: false });
    for (const { loop } of [overlapped, plain]) {
      for (const count of [3, 1, 4])
        await loop.runTask(claimedTask(), minibatchesOf(count), { stop: never, preempt: never });
      await loop.landRounds(never);
    }
    expect(overlapped.shard.pushes.map((p) => p.samples)).toEqual(plain.shard.pushes.map((p) => p.samples));
    expect(overlapped.shard.value).toBe(plain.shard.value);
    expect(overlapped.learner.x).toBe(plain.learner.x);
  });

  it('overlapped rounds - a task that fails leaves the round of the task before on its way, and landRounds lands it without its steps', async () => {
    const { learner, shard, loop } = setup();
    const first = await loop.runTask(claimedTask(), minibatchesOf(2), { stop: never, preempt: never });
    const failing = minibatchesOf(0);
    failing.batches = async function* () {
      yield* minibatchesOf(1).batches(claimedTask());
      throw new Error('bad record');
    };
    const second = await loop.runTask(claimedTask(), failing, { stop: never, preempt: never });
    expect(second).toMatchObject({ kind: 'failed', error: 'bad record' });
    expect(await loop.landRounds(never)).toBe('pushed');
    expect(await landingOf(first)).toEqual({ kind: 'landed' });
    // The failed task's step was dropped: the learner holds the servers' parameters.
    expect(shard.pushes.map((p) => p.samples)).toEqual([2]);
    expect(learner.x).toBe(shard.value);
  });

  it('overlapped rounds - a task that fails after the round of the task before landed drops its steps', async () => {
    const { journal, shard, loop } = setup({ localSteps: 3 });
    await loop.runTask(claimedTask(), minibatchesOf(3), { stop: never, preempt: never });
    const failing = minibatchesOf(0);
    failing.batches = async function* () {
      yield* minibatchesOf(2).batches(claimedTask());
      throw new Error('bad record');
    };
    const second = await loop.runTask(claimedTask(), failing, { stop: never, preempt: never });
    expect(second).toMatchObject({ kind: 'failed', error: 'bad record' });
    // The first task's round landed before the failed task's second step.
    expect(doneIn(journal).slice(6)).toEqual(['train', 'set -1', 'train']);
    // The next task starts from the servers' parameters, without the failed task's steps.
    await loop.runTask(claimedTask(), minibatchesOf(1), { stop: never, preempt: never });
    await loop.landRounds(never);
    expect(doneIn(journal).slice(9, 11)).toEqual(['pull 4', 'set 0']);
    expect(shard.pushes.map((p) => [p.version, p.samples, p.delta])).toEqual([
      [3, 3, -3],
      [4, 1, -1],
    ]);
  });

  it('overlapped rounds - a task that took no step waits for the round of the task before it too', async () => {
    const { loop } = setup();
    const first = await loop.runTask(claimedTask(), minibatchesOf(2), { stop: never, preempt: never });
    const empty = await loop.runTask(claimedTask(), minibatchesOf(0), { stop: never, preempt: never });
    await loop.landRounds(never);
    expect(await landingOf(first)).toEqual({ kind: 'landed' });
    expect(await landingOf(empty)).toEqual({ kind: 'landed' });
  });

  it('overlapped rounds - abandonRounds tells the task waiting for its round that it was interrupted', async () => {
    const { loop, journal } = setup();
    const first = await loop.runTask(claimedTask(), minibatchesOf(2), { stop: never, preempt: never });
    loop.abandonRounds();
    expect(await landingOf(first)).toEqual({ kind: 'interrupted' });
    // The next task starts from the servers' parameters.
    await loop.runTask(claimedTask(), minibatchesOf(1), { stop: never, preempt: never });
    expect(doneIn(journal).slice(5, 7)).toEqual(['pull 3', 'set 3']);
  });
});
