import type { RecordLayout } from './job-spec.js';
import { resolveTopology } from './layers-topology.js';
import { cnnInputShape, featureCount, maxCnnLayers } from './model-input.js';
import { defaultMetric, isClassification, metricDirection, reachesTarget } from './objective.js';

describe('job spec queries', () => {
  it('objective - classification is told by numClasses, and sets the default metric', () => {
    const layout: RecordLayout = {
      featureShape: [4],
      featureDtype: 'float32',
      scale: 1,
      labelDtype: 'int32',
      numClasses: 3,
    };
    expect(isClassification({ dataset: { train: ['a'], eval: ['b'], layout } })).toBe(true);
    expect(
      isClassification({ dataset: { train: ['a'], eval: ['b'], layout: { ...layout, numClasses: undefined } } }),
    ).toBe(false);
    expect(defaultMetric({ numClasses: 10 })).toBe('accuracy');
    expect(defaultMetric({})).toBe('loss');
  });

  it('objective - accuracy is maximised and loss minimised', () => {
    expect(metricDirection('accuracy')).toBe('max');
    expect(metricDirection('loss')).toBe('min');
    expect(reachesTarget(0.9, 0.85, 'max')).toBe(true);
    expect(reachesTarget(0.8, 0.85, 'max')).toBe(false);
    expect(reachesTarget(0.01, 0.02, 'min')).toBe(true);
    expect(reachesTarget(0.03, 0.02, 'min')).toBe(false);
  });

  it('model input - the cnn preset reads rank 3 as is and a square rank 1 as one channel', () => {
    expect(cnnInputShape([28, 28, 1])).toEqual([28, 28, 1]);
    expect(cnnInputShape([784])).toEqual([28, 28, 1]);
    expect(cnnInputShape([785])).toBeUndefined();
    expect(cnnInputShape([28, 28])).toBeUndefined();
    expect(featureCount([28, 28, 1])).toBe(784);
    expect(maxCnnLayers([28, 28, 1])).toBe(4);
    expect(maxCnnLayers([1, 100, 3])).toBe(0);
    expect(maxCnnLayers([32, 64, 3])).toBe(5);
  });

  it('layers topology - found directly, in modelTopology, or in modelTopology.model_config', () => {
    const topology = { class_name: 'Sequential', config: { layers: [] } };
    expect(resolveTopology(topology)).toBe(topology);
    expect(resolveTopology({ modelTopology: topology })).toBe(topology);
    expect(resolveTopology({ modelTopology: { model_config: topology } })).toBe(topology);
    expect(resolveTopology({ class_name: 'Sequential' })).toBeUndefined();
    expect(resolveTopology({ class_name: '', config: {} })).toBeUndefined();
    expect(resolveTopology({ modelTopology: 'x' })).toBeUndefined();
  });
});
