import * as tf from '@tensorflow/tfjs';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ModelFilesError } from './errors.js';
import { TfjsLearner } from './learner.js';
import { loadLayersModelFromDir, saveLayersModel } from './model-export.js';

describe('model export', () => {
  let dir: string;

  beforeAll(async () => {
    await tf.setBackend('cpu');
    dir = await mkdtemp(join(tmpdir(), 'learner-export-'));
  });

  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('model export - a saved model loads back with equal predictions', async () => {
    const learner = new TfjsLearner();
    await learner.initialize({
      model: { preset: 'cnn', filters: [2], kernelSize: 3, denseUnits: 5, activation: 'relu' },
      layout: { featureShape: [6, 6, 1], featureDtype: 'uint8', scale: 1 / 255, labelDtype: 'int32', numClasses: 3 },
      seed: 1,
    });
    const out = join(dir, 'cnn');
    const result = await saveLayersModel(learner.model, out);
    expect(result.modelArtifactsInfo.weightDataBytes).toBeGreaterThan(0);
    expect((await readdir(out)).sort()).toEqual(['model.json', 'weights.bin']);
    const json = JSON.parse(await readFile(join(out, 'model.json'), 'utf8')) as tf.io.ModelJSON;
    expect(json.weightsManifest[0]!.paths).toEqual(['weights.bin']);
    expect(json.format).toBe('layers-model');

    const loaded = await loadLayersModelFromDir(out);
    const x = tf.randomUniform([4, 6, 6, 1], 0, 1, 'float32', 3);
    const expected = (learner.model.predict(x) as tf.Tensor).dataSync();
    const actual = (loaded.predict(x) as tf.Tensor).dataSync();
    expect(Array.from(actual)).toEqual(Array.from(expected));
    tf.dispose(x);
    loaded.dispose();
    learner.shutdown();
  });

  it('model export - a missing directory is reported with its path', async () => {
    const missing = join(dir, 'missing');
    await expect(loadLayersModelFromDir(missing)).rejects.toThrow(ModelFilesError);
    await expect(loadLayersModelFromDir(missing)).rejects.toThrow(join(missing, 'model.json'));
  });
});
