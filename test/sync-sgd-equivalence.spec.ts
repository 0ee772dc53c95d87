import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { encodeExampleValues } from '#libs/dataset';
import {
  TfjsLearner,
  decodeBatch,
  type Batch,
  type LearnerSpec,
  type PlainTensor,
  type TfjsLearnerOptions,
} from '#libs/learner';
import { ShardedPserverClient } from '#libs/pserver-client';
import { startShards, type RunningShard } from '../services/pserver/test/in-process-shards.js';
import { seededRandom, TINY_CLASSES, TINY_FEATURES } from './support/tiny-dataset.js';

/** Steps compared, and the per-trainer batch size b (the single trainer uses 2b). */
const STEPS = 5;
const B = 16;

const LEARNER_SPEC: LearnerSpec = {
  model: { preset: 'mlp', hiddenUnits: [12], activation: 'relu', dropout: 0 },
  layout: {
    featureShape: [TINY_FEATURES],
    featureDtype: 'float32',
    scale: 1,
    labelDtype: 'int32',
    numClasses: TINY_CLASSES,
  },
  seed: 7,
};
/**
 * Plain SGD is compared as well as Adam: Adam is invariant to the scale of the gradient, so a
 * barrier that summed the trainers' gradients instead of averaging them would pass with Adam alone.
 */
const OPTIMIZERS = {
  sgd: { type: 'sgd', learningRate: 0.5 },
  adam: { type: 'adam', learningRate: 0.01 },
} as const;
const SPEC_JSON = (optimizer: keyof typeof OPTIMIZERS, min: number, training: object = {}) =>
  JSON.stringify({ optimizer: OPTIMIZERS[optimizer], trainers: { min }, training });

/** 2b examples for each step, the same for both runs. */
function stepBatches(): Uint8Array[][] {
  const rand = seededRandom(3);
  return Array.from({ length: STEPS }, () =>
    Array.from({ length: 2 * B }, () => {
      const label = Math.floor(rand() * TINY_CLASSES);
      const x = Array.from({ length: TINY_FEATURES }, (_, f) => (f % TINY_CLASSES === label ? 1 : 0) + rand() - 0.5);
      return encodeExampleValues(x, label, LEARNER_SPEC.layout);
    }),
  );
}

/** One trainer: a learner and its pserver client, stepping through its share of each step's batch. */
async function trainer(
  shards: RunningShard[],
  jobId: string,
  id: string,
  options: TfjsLearnerOptions = {},
  partition?: { minElements: number },
): Promise<{ learner: TfjsLearner; client: ShardedPserverClient }> {
  const learner = new TfjsLearner(options);
  await learner.initialize(LEARNER_SPEC);
  const params = await learner.getParams();
  const client = ShardedPserverClient.fromAddresses(
    shards.map((s) => s.address),
    {
      jobId,
      trainerId: id,
      params: params.map((p) => ({ name: p.name, shape: p.shape })),
      ...(partition ? { partition } : {}),
    },
  );
  return { learner, client };
}

async function train(
  t: { learner: TfjsLearner; client: ShardedPserverClient },
  share: (records: Uint8Array[]) => Uint8Array[],
  batches: Uint8Array[][],
): Promise<void> {
  for (let step = 0; step < STEPS; step++) {
    const pulled = await t.client.pullParams(step);
    expect(pulled.versions.every((v) => v === step)).toBe(true);
    t.learner.setParams(
      pulled.tensors.map((p) => ({ ...p, dtype: 'float32' as const, shape: [...p.shape] })) as PlainTensor[],
    );
    const batch: Batch = decodeBatch(share(batches[step]), LEARNER_SPEC.layout);
    await t.learner.train(batch);
    const outcome = await t.client.pushGradients(pulled.versions, batch.size, await t.learner.getUpdate());
    expect(outcome.stale).toEqual([]);
  }
}

describe('sync SGD with real learners', () => {
  let dir: string;
  let shards: RunningShard[];

  beforeAll(async () => {
    await tf.setBackend('cpu');
    dir = await mkdtemp(join(tmpdir(), 'tributary-sync-learners-'));
    shards = await startShards(2, { dataDir: dir });
  });

  afterAll(async () => {
    await Promise.all(shards.map((s) => s.stop()));
    await rm(dir, { recursive: true, force: true });
  });

  /**
   * Equal shares, and unequal ones (10 and 22 examples against 32 on one trainer): a barrier that
   * averaged the trainers' mean gradients without weighting them by their examples fails there.
   */
  test.each([
    { optimizer: 'sgd', shares: [16, 16] },
    { optimizer: 'adam', shares: [16, 16] },
    { optimizer: 'sgd', shares: [10, 22] },
    { optimizer: 'adam', shares: [10, 22] },
  ] as const)(
    'sync sgd - with $optimizer, 2 trainers of $shares examples give the parameters of 1 trainer of 32 after K steps',
    async ({ optimizer, shares: [firstShare] }) => {
      const batches = stepBatches();
      const run = `${optimizer}-${firstShare}`;

      const solo = await trainer(shards, `solo-${run}`, 'solo');
      await solo.client.initialize(SPEC_JSON(optimizer, 1), () => solo.learner.getParams());
      await solo.client.join();
      await train(solo, (r) => r, batches);

      const a = await trainer(shards, `pair-${run}`, 'a');
      const b = await trainer(shards, `pair-${run}`, 'b');
      await Promise.all([
        a.client.initialize(SPEC_JSON(optimizer, 2), () => a.learner.getParams(), { pollMs: 10 }),
        b.client.initialize(SPEC_JSON(optimizer, 2), () => b.learner.getParams(), { pollMs: 10 }),
      ]);
      await Promise.all([a.client.join(), b.client.join()]);
      await Promise.all([
        train(a, (r) => r.slice(0, firstShare), batches),
        train(b, (r) => r.slice(firstShare), batches),
      ]);

      const [one, two] = await Promise.all([solo.client.pullParams(STEPS), a.client.pullParams(STEPS)]);
      let maxDiff = 0;
      let moved = 0;
      one.tensors.forEach((t, i) =>
        t.data.forEach((v, j) => {
          maxDiff = Math.max(maxDiff, Math.abs(v - two.tensors[i].data[j]));
        }),
      );
      for (const t of [solo, a, b]) {
        t.client.close();
        t.learner.shutdown();
      }
      expect(maxDiff).toBeLessThanOrEqual(1e-4);
      // The models moved away from their common initialisation, so the comparison means something.
      const fresh = new TfjsLearner();
      await fresh.initialize(LEARNER_SPEC);
      const init = await fresh.getParams();
      fresh.shutdown();
      init.forEach((p, i) => p.data.forEach((v, j) => (moved = Math.max(moved, Math.abs(v - one.tensors[i].data[j])))));
      expect(moved).toBeGreaterThan(1e-2);
    },
  );

  /**
   * Parameters cut into blocks over both shards (`pservers.partition`) train exactly as whole
   * ones: the optimizers work element by element, and the trainers cut and join the blocks.
   */
  test.each(['sgd', 'adam'] as const)(
    'sync sgd - with %s, parameters cut into blocks over 2 shards give the parameters of whole ones',
    async (optimizer) => {
      const batches = stepBatches();
      const pair = async (jobId: string, partition?: { minElements: number }) => {
        const a = await trainer(shards, jobId, 'a', {}, partition);
        const b = await trainer(shards, jobId, 'b', {}, partition);
        await Promise.all([
          a.client.initialize(SPEC_JSON(optimizer, 2), () => a.learner.getParams(), { pollMs: 10 }),
          b.client.initialize(SPEC_JSON(optimizer, 2), () => b.learner.getParams(), { pollMs: 10 }),
        ]);
        await Promise.all([a.client.join(), b.client.join()]);
        await Promise.all([train(a, (r) => r.slice(0, 10), batches), train(b, (r) => r.slice(10), batches)]);
        const pulled = await a.client.pullParams(STEPS);
        const tensors = (await a.client.status()).map((r) => r.jobs.find((j) => j.jobId === jobId)?.tensors ?? 0);
        for (const t of [a, b]) {
          t.client.close();
          t.learner.shutdown();
        }
        return { pulled, tensors };
      };
      const whole = await pair(`whole-${optimizer}`);
      const cut = await pair(`blocks-${optimizer}`, { minElements: 1 });
      // Four parameters whole; each cut in two, both shards holding one block of every one.
      expect(whole.tensors.reduce((a, b) => a + b, 0)).toBe(4);
      expect(cut.tensors).toEqual([4, 4]);
      expect(cut.pulled.tensors.map((t) => [t.name, t.shape])).toEqual(
        whole.pulled.tensors.map((t) => [t.name, t.shape]),
      );
      cut.pulled.tensors.forEach((t, i) => expect(t.data).toEqual(whole.pulled.tensors[i].data));
    },
  );

  /**
   * The other modes that step by rounds reduce to sync SGD at their limits: `ssp` with
   * `maxStaleness` 0 (every push is for the version its parameters have), and `local` with one
   * local SGD step per round and the deltas averaged (each delta is -learningRate times the
   * trainer's gradient, so their average added is the sync step). Unequal shares check that both
   * weigh the trainers by their examples.
   */
  test.each([
    { mode: 'ssp', training: { mode: 'ssp', maxStaleness: 0 }, learner: {} },
    {
      mode: 'local',
      training: { mode: 'local', localSteps: 1, localSync: true },
      learner: { mode: 'delta', localLearningRate: OPTIMIZERS.sgd.learningRate },
    },
  ] as const)(
    'sync sgd - $mode at its sync limit gives the parameters of sync with 2 trainers of 10 and 22 examples',
    async ({ mode, training, learner }) => {
      const batches = stepBatches();
      const pair = async (jobId: string, spec: string, options: TfjsLearnerOptions) => {
        const a = await trainer(shards, jobId, 'a', options);
        const b = await trainer(shards, jobId, 'b', options);
        await Promise.all([
          a.client.initialize(spec, () => a.learner.getParams(), { pollMs: 10 }),
          b.client.initialize(spec, () => b.learner.getParams(), { pollMs: 10 }),
        ]);
        await Promise.all([a.client.join(), b.client.join()]);
        await Promise.all([train(a, (r) => r.slice(0, 10), batches), train(b, (r) => r.slice(10), batches)]);
        const pulled = await a.client.pullParams(STEPS);
        for (const t of [a, b]) {
          t.client.close();
          t.learner.shutdown();
        }
        return pulled;
      };
      const sync = await pair(`sync-limit-${mode}`, SPEC_JSON('sgd', 2), {});
      const other = await pair(`${mode}-limit`, SPEC_JSON('sgd', 2, training), learner);
      expect(other.versions.every((v) => v === STEPS)).toBe(true);
      let maxDiff = 0;
      sync.tensors.forEach((t, i) =>
        t.data.forEach((v, j) => (maxDiff = Math.max(maxDiff, Math.abs(v - other.tensors[i].data[j])))),
      );
      expect(maxDiff).toBeLessThanOrEqual(1e-5);
      // The models moved away from their common initialisation, so the comparison means something.
      const fresh = new TfjsLearner();
      await fresh.initialize(LEARNER_SPEC);
      const init = await fresh.getParams();
      fresh.shutdown();
      let moved = 0;
      init.forEach((p, i) =>
        p.data.forEach((v, j) => (moved = Math.max(moved, Math.abs(v - sync.tensors[i].data[j])))),
      );
      expect(moved).toBeGreaterThan(1e-2);
    },
  );
});
