import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { TfjsLearner, selectBackend, type Batch, type LearnerSpec, type PlainTensor } from '#libs/learner';
import { learnerOptions } from './learner-options.js';
import { LearnerThread, usesLearnerThread, type LearnerJob } from './learner-thread.js';

/*
 * The learner thread runs the compiled script (`npm run build` makes it), as the trainer does.
 */
const ENTRY = pathToFileURL(join(process.cwd(), 'dist', 'services', 'trainer', 'src', 'learner-thread-main.js'));

const SPEC: LearnerSpec = {
  model: { preset: 'mlp', hiddenUnits: [8], activation: 'relu', dropout: 0 },
  layout: { featureShape: [6], featureDtype: 'float32', scale: 1, labelDtype: 'int32', numClasses: 3 },
  seed: 7,
};
const SYNC: LearnerJob = {
  training: { mode: 'sync', batchSize: 4 },
  optimizer: { type: 'adam', learningRate: 0.01 },
} as LearnerJob;
const LOCAL: LearnerJob = {
  training: { mode: 'local', batchSize: 4, localSteps: 2 },
  optimizer: { type: 'sgd', learningRate: 0.1 },
} as LearnerJob;

/** A minibatch whose features are views into a larger array, as the minibatch reader hands out. */
function batch(seed: number): Batch {
  const all = new Float32Array(64).map((_, i) => Math.sin(seed * 31 + i));
  return { features: all.subarray(8, 8 + 24), labels: Int32Array.of(seed % 3, 1, 2, 0), size: 4 };
}

function values(tensors: PlainTensor[]): number[][] {
  return tensors.map((t) => Array.from(t.data));
}

function expectClose(a: number[][], b: number[][]): void {
  expect(a.map((t) => t.length)).toEqual(b.map((t) => t.length));
  a.forEach((t, i) => t.forEach((v, j) => expect(v).toBeCloseTo(b[i]![j]!, 5)));
}

/** The same calls on a learner: its initial parameters, two updates, and a score. */
async function session(learner: ReturnType<typeof LearnerThread.learner> | TfjsLearner) {
  await learner.initialize(SPEC);
  const initial = await learner.getParams();
  learner.setParams(initial);
  await learner.train(batch(1));
  await learner.train(batch(2));
  const first = await learner.getUpdate();
  await learner.train(batch(3));
  const second = await learner.getUpdate();
  const score = await learner.evaluate(batch(4));
  learner.shutdown();
  return { initial: values(initial), first: values(first), second: values(second), score };
}

describe('learner thread', () => {
  let thread: Promise<LearnerThread>;

  beforeAll(async () => {
    await selectBackend('cpu');
    thread = LearnerThread.start('cpu', ENTRY);
    await thread;
  });

  afterAll(async () => {
    await (await thread).close();
  });

  it('learner thread - says the backend it took, and trains, updates and scores as the learner in this thread does', async () => {
    expect((await thread).backend.name).toBe('cpu');
    for (const job of [SYNC, LOCAL]) {
      const here = await session(new TfjsLearner(learnerOptions(job)));
      const there = await session(LearnerThread.learner(thread, job));
      expectClose(there.initial, here.initial);
      expectClose(there.first, here.first);
      expectClose(there.second, here.second);
      expect(there.score.samples).toBe(4);
      expect(there.score.correct).toBe(here.score.correct);
      expect(there.score.lossSum).toBeCloseTo(here.score.lossSum, 4);
    }
  });

  it('learner thread - trainForUpdate is train then getUpdate in one call', async () => {
    const apart = LearnerThread.learner(thread, SYNC);
    await apart.initialize(SPEC);
    const start = await apart.getParams();
    const loss = (await apart.train(batch(5))).loss;
    const update = values(await apart.getUpdate());
    const together = LearnerThread.learner(thread, SYNC);
    await together.initialize(SPEC);
    together.setParams(start);
    const both = await together.trainForUpdate!(batch(5));
    expect(both.result.loss).toBeCloseTo(loss, 6);
    expectClose(values(both.update), update);
    together.shutdown();
  });

  it('learner thread - an error there is thrown here with its message, and the thread serves on', async () => {
    const learner = LearnerThread.learner(thread, SYNC);
    expect(() => learner.setParams([])).toThrow(/not initialised/);
    await learner.initialize(SPEC);
    // setParams does not wait: what went wrong comes with the next call.
    learner.setParams([{ name: 'nope', dtype: 'float32', shape: [1], data: Float32Array.of(1) }]);
    await expect(learner.train(batch(1))).rejects.toThrow(/param/i);
    await expect(learner.train({ ...batch(1), size: 3 })).rejects.toThrow();
    await expect(learner.train(batch(1))).resolves.toMatchObject({ samples: 4 });
    learner.shutdown();
  });

  it('learner thread - a thread that dies fails the calls waiting on it, and says so', async () => {
    const own = await LearnerThread.start('cpu', ENTRY);
    const exits: string[] = [];
    own.onExit = (err) => exits.push(err.message);
    const learner = LearnerThread.learner(Promise.resolve(own), SYNC);
    await learner.initialize(SPEC);
    await (own as unknown as { worker: { terminate(): Promise<number> } }).worker.terminate();
    await expect(learner.getParams()).rejects.toThrow(/exited/);
    expect(exits).toEqual([expect.stringMatching(/exited with code/)]);
  });

  it('learner thread - a backend the thread cannot take fails its start with the reason', async () => {
    await expect(LearnerThread.start('no-such-backend', ENTRY)).rejects.toThrow(/unknown backend 'no-such-backend'/);
  });

  it('learner thread - auto uses it for jobs whose pushes overlap training; on and off for every job', () => {
    const overlapped = { ...SYNC, training: { ...SYNC.training, mode: 'async', overlapPushes: true } } as LearnerJob;
    const serial = { ...SYNC, training: { ...SYNC.training, mode: 'async' } } as LearnerJob;
    expect(usesLearnerThread('auto', overlapped)).toBe(true);
    expect(usesLearnerThread('auto', serial)).toBe(false);
    expect(usesLearnerThread('auto', SYNC)).toBe(false);
    expect(usesLearnerThread('on', SYNC)).toBe(true);
    expect(usesLearnerThread('off', overlapped)).toBe(false);
  });
});
