import { validateJobSpec, type JobSpec } from '#libs/job-spec';

/**
 * The smallest valid job spec, validated (defaults filled), for tests of pure logic over specs:
 * two float32 features, two classes, an MLP with SGD, one epoch. `training` is merged over its
 * batch size; the other top-level fields of `changes` replace the spec's.
 */
export function minimalJobSpec(id: string, changes: { training?: object } & Record<string, unknown> = {}): JobSpec {
  const { training, ...rest } = changes;
  return validateJobSpec({
    id,
    dataset: {
      train: ['t.recordio'],
      eval: ['e.recordio'],
      layout: { featureShape: [2], featureDtype: 'float32', labelDtype: 'int32', numClasses: 2 },
    },
    model: { preset: 'mlp' },
    optimizer: { type: 'sgd', learningRate: 0.1 },
    training: { batchSize: 4, ...training },
    stop: { maxEpochs: 1 },
    output: 'out',
    ...rest,
  });
}
