import * as tf from '@tensorflow/tfjs';
import fc from 'fast-check';
import { prepareWasmBackend } from './backend.js';
import { DenseStack } from './dense-stack.js';
import { createLossHead, type LossHead } from './loss-head.js';
import type { LearnerSpec, RecordLayout } from './model-spec.js';
import { buildModel } from './models.js';
import { namedTrainableVariables, type NamedVariable } from './param-names.js';

interface Built {
  model: tf.LayersModel;
  head: LossHead;
  params: NamedVariable[];
}

async function build(spec: LearnerSpec): Promise<Built> {
  const model = await buildModel(spec);
  return { model, head: createLossHead(model, spec.layout), params: namedTrainableVariables(model) };
}

/** The loss and gradients as TF.js's tape gives them, as the learner took them before the stack. */
function throughTape({ head, params }: Built, x: tf.Tensor, y: tf.Tensor1D): { value: tf.Scalar; grads: tf.Tensor[] } {
  const vars = params.map((p) => p.variable);
  const result = tf.variableGrads(
    () => head.meanLoss(head.lossModel.apply(x, { training: true }) as tf.Tensor, y),
    vars,
  );
  return { value: result.value, grads: vars.map((v) => result.grads[v.name]!) };
}

const layoutOf = (featureShape: number[], numClasses: number | undefined): RecordLayout => ({
  featureShape,
  featureDtype: 'float32',
  scale: 1,
  labelDtype: numClasses === undefined ? 'float32' : 'int32',
  ...(numClasses === undefined ? {} : { numClasses }),
});

describe.each(['cpu', 'wasm'])('dense stack on %s', (backendName) => {
  beforeAll(async () => {
    await prepareWasmBackend();
    expect(await tf.setBackend(backendName)).toBe(true);
  });

  it('dense stack - the loss and every gradient are those of the tape, to the bit', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          featureShape: fc.oneof(
            fc.tuple(fc.integer({ min: 1, max: 30 })),
            fc.tuple(fc.integer({ min: 1, max: 5 }), fc.integer({ min: 1, max: 6 })),
          ),
          hiddenUnits: fc.array(fc.integer({ min: 1, max: 20 }), { maxLength: 2 }),
          numClasses: fc.integer({ min: 2, max: 6 }),
          rows: fc.integer({ min: 1, max: 9 }),
          seed: fc.integer({ min: 0, max: 1_000_000 }),
          zeros: fc.double({ min: 0, max: 0.9, noNaN: true }),
        }),
        async ({ featureShape, hiddenUnits, numClasses, rows, seed, zeros }) => {
          const spec: LearnerSpec = {
            model: { preset: 'mlp', hiddenUnits, activation: 'relu', dropout: 0 },
            layout: layoutOf(featureShape, numClasses),
            seed,
          };
          const built = await build(spec);
          try {
            const stack = DenseStack.of(built.head, built.params, numClasses);
            expect(stack).toBeDefined();
            expect(stack!.usable).toBe(true);
            const values = Array.from({ length: rows * featureShape.reduce((a, b) => a * b, 1) }, (_, i) => {
              const r = Math.sin(seed + i * 12.9898) * 43758.5453;
              const u = r - Math.floor(r);
              return u < zeros ? 0 : 4 * u - 2;
            });
            const labels = Int32Array.from({ length: rows }, (_, i) => (seed + 7 * i) % numClasses);
            const [tape, ours] = tf.tidy(() => {
              const x = tf.tensor(values, [rows, ...featureShape], 'float32');
              const y = tf.tensor1d(labels, 'int32');
              const a = throughTape(built, x, y);
              const b = stack!.lossAndGradients(x, y);
              return [[a.value, ...a.grads].map((t) => t.dataSync()), [b.value, ...b.grads].map((t) => t.dataSync())];
            });
            expect(ours.length).toBe(built.params.length + 1);
            ours.forEach((got, i) => expect(got).toEqual(tape[i]));
          } finally {
            built.model.dispose();
          }
        },
      ),
      { numRuns: 40 },
    );
  });
});

describe('dense stack', () => {
  it('dense stack - any other model is left to the tape', async () => {
    await prepareWasmBackend();
    await tf.setBackend('wasm');
    const classes = layoutOf([6], 3);
    const others: LearnerSpec[] = [
      { model: { preset: 'mlp', hiddenUnits: [4], activation: 'tanh', dropout: 0 }, layout: classes, seed: 1 },
      { model: { preset: 'mlp', hiddenUnits: [4], activation: 'relu', dropout: 0.5 }, layout: classes, seed: 1 },
      {
        model: { preset: 'cnn', filters: [2], kernelSize: 3, denseUnits: 4, activation: 'relu' },
        layout: { ...layoutOf([6, 6, 1], 3), featureDtype: 'uint8' },
        seed: 1,
      },
      // Regression: no cross-entropy.
      {
        model: { preset: 'mlp', hiddenUnits: [4], activation: 'relu', dropout: 0 },
        layout: layoutOf([6], undefined),
        seed: 1,
      },
    ];
    for (const spec of others) {
      const built = await build(spec);
      expect(DenseStack.of(built.head, built.params, spec.layout.numClasses)).toBeUndefined();
      built.model.dispose();
    }

    // A regulariser adds to the loss; branches are not a chain.
    const regularised = tf.sequential({
      layers: [
        tf.layers.dense({ units: 4, inputShape: [6], activation: 'relu', kernelRegularizer: tf.regularizers.l2() }),
        tf.layers.dense({ units: 3 }),
      ],
    });
    const input = tf.input({ shape: [6] });
    const left = tf.layers.dense({ units: 3 }).apply(input) as tf.SymbolicTensor;
    const right = tf.layers.dense({ units: 3 }).apply(input) as tf.SymbolicTensor;
    const branched = tf.model({ inputs: input, outputs: tf.layers.add().apply([left, right]) as tf.SymbolicTensor });
    for (const model of [regularised, branched]) {
      const head = createLossHead(model, classes);
      expect(DenseStack.of(head, namedTrainableVariables(model), 3)).toBeUndefined();
      model.dispose();
    }
    // The same chain without the regulariser is taken.
    const plain = tf.sequential({
      layers: [tf.layers.dense({ units: 4, inputShape: [6], activation: 'relu' }), tf.layers.dense({ units: 3 })],
    });
    expect(DenseStack.of(createLossHead(plain, classes), namedTrainableVariables(plain), 3)).toBeDefined();
    plain.dispose();
  });
});
