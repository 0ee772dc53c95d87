import type { JobSpecViolation } from './errors.js';
import type { JobSpec, RecordLayout } from './job-spec.js';
import { jobLimitViolations, modelParameterCount, specSizeViolation } from './job-limits.js';

const MNIST: RecordLayout = {
  featureShape: [28, 28, 1],
  featureDtype: 'uint8',
  scale: 1 / 255,
  labelDtype: 'int32',
  numClasses: 10,
};

function withModel(model: JobSpec['model'], layout: RecordLayout = MNIST): JobSpec {
  return { id: 'j', model, dataset: { train: [], eval: [], layout } } as unknown as JobSpec;
}

describe('job limits', () => {
  test('job limits - the mlp preset counts weights and biases of every dense layer', () => {
    const mlp = { preset: 'mlp', hiddenUnits: [128, 64], activation: 'relu', dropout: 0 } as const;
    // 784*128+128 + 128*64+64 + 64*10+10
    expect(modelParameterCount({ ...mlp, hiddenUnits: [...mlp.hiddenUnits] }, MNIST)).toBe(109_386);
    const regression: RecordLayout = { ...MNIST, featureShape: [4], numClasses: undefined, labelDtype: 'float32' };
    expect(modelParameterCount({ ...mlp, hiddenUnits: [] }, regression)).toBe(5);
  });

  test('job limits - the cnn preset counts convolutions, the dense layer and the output', () => {
    const cnn = { preset: 'cnn', filters: [8, 16], kernelSize: 3, denseUnits: 32, activation: 'relu' } as const;
    // conv 3*3*1*8+8, conv 3*3*8*16+16, dense 7*7*16*32+32, output 32*10+10
    expect(modelParameterCount({ ...cnn, filters: [...cnn.filters] }, MNIST)).toBe(80 + 1168 + 25_120 + 330);
    // [784] reads as a 28x28 image with one channel.
    expect(modelParameterCount({ ...cnn, filters: [...cnn.filters] }, { ...MNIST, featureShape: [784] })).toBe(26_698);
  });

  test('job limits - a topology is not counted before it is built', () => {
    expect(modelParameterCount({ topology: {} } as JobSpec['model'], MNIST)).toBeUndefined();
  });

  test('job limits - a model over MAX_JOB_PARAMETERS is refused on model, naming the count and the limit', () => {
    const huge = withModel({ preset: 'mlp', hiddenUnits: [100_000_000], activation: 'relu', dropout: 0 });
    const violations: JobSpecViolation[] = jobLimitViolations(huge, { maxParameters: 1_000_000_000 });
    expect(violations).toEqual([
      {
        field: 'model',
        reason: 'has 79,500,000,010 parameters, more than MAX_JOB_PARAMETERS (1,000,000,000)',
      },
    ]);
    const small = withModel({ preset: 'mlp', hiddenUnits: [10], activation: 'relu', dropout: 0 });
    expect(jobLimitViolations(small, { maxParameters: 7960 })).toEqual([]);
    expect(jobLimitViolations(small, { maxParameters: 7959 })).toHaveLength(1);
  });

  test('job limits - a spec over MAX_JOB_SPEC_BYTES is refused at its root', () => {
    expect(specSizeViolation(1024, 1024)).toBeUndefined();
    expect(specSizeViolation(1025, 1024)).toEqual({
      field: '(root)',
      reason: 'is 1025 bytes, more than MAX_JOB_SPEC_BYTES (1024)',
    });
  });
});
