import * as tf from '@tensorflow/tfjs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { selectBackend } from './backend.js';
import { BackendUnavailableError } from './errors.js';
import { backendKernelBehind } from './kernels/register.js';
import { TfjsLearner, type Batch } from './learner.js';
import type { LearnerSpec } from './model-spec.js';
import { loadLayersModelFromDir, saveLayersModel } from './model-export.js';
import { isResolvable } from './optional-package.js';
import { vulkanLoaderPresent, WebgpuAdapter } from './webgpu-adapter.js';

/**
 * Dawn's `null` backend: a real Dawn adapter and device on any machine, whose shaders do
 * nothing. It drives the whole webgpu route (adapter, device, tfjs-backend-webgpu, the learner)
 * through the real packages without a GPU, so these tests check code paths, kernels and
 * shapes, never computed values.
 */
const NULL_BACKEND = ['backend=null'];

const HAS_WEBGPU = isResolvable('webgpu') && isResolvable('@tensorflow/tfjs-backend-webgpu');
const HAS_TFJS_NODE = isResolvable('@tensorflow/tfjs-node') || isResolvable('@tensorflow/tfjs-node-gpu');

const SPECS: LearnerSpec[] = [
  {
    model: { preset: 'mlp', hiddenUnits: [16, 8], activation: 'tanh', dropout: 0.2 },
    layout: { featureShape: [4, 3], featureDtype: 'float32', scale: 1, labelDtype: 'int32', numClasses: 3 },
    seed: 7,
  },
  {
    model: { preset: 'cnn', filters: [3, 4], kernelSize: 3, denseUnits: 8, activation: 'elu' },
    layout: { featureShape: [8, 8, 1], featureDtype: 'uint8', scale: 1 / 255, labelDtype: 'int32', numClasses: 4 },
    seed: 11,
  },
  {
    model: { preset: 'mlp', hiddenUnits: [8], activation: 'relu', dropout: 0 },
    layout: { featureShape: [5], featureDtype: 'float32', scale: 1, labelDtype: 'float32' },
    seed: 3,
  },
];

function batchFor(spec: LearnerSpec, size: number): Batch {
  const perExample = spec.layout.featureShape.reduce((a, b) => a * b, 1);
  const features = Float32Array.from({ length: size * perExample }, (_, i) => (i % 7) / 7);
  const classes = spec.layout.numClasses;
  const labels =
    classes === undefined
      ? Float32Array.from({ length: size }, (_, i) => i / size)
      : Int32Array.from({ length: size }, (_, i) => i % classes);
  return { features, labels, size };
}

(HAS_WEBGPU ? describe : describe.skip)('webgpu route on Dawn', () => {
  it("webgpu adapter - a Dawn option it does not know fails the probe with Dawn's reason", async () => {
    const probe = WebgpuAdapter.find(['backend=no-such-backend']);
    await expect(probe).rejects.toThrow(BackendUnavailableError);
    await expect(probe).rejects.toThrow(
      "webgpu: the adapter request with Dawn options [backend=no-such-backend] failed: unrecognised backend 'no-such-backend'",
    );
  });

  it("webgpu adapter - Dawn's null backend is found and judged not a GPU", async () => {
    const adapter = await WebgpuAdapter.find(NULL_BACKEND);
    expect(adapter.description).toBe('null-backend');
    expect(adapter.software).toBe('a software renderer (null-backend) on the CPU, not a GPU');
  });

  it('webgpu route - automatic selection passes a software adapter over and says why', async () => {
    const info = await selectBackend('', { dawnOptions: NULL_BACKEND });
    if (HAS_TFJS_NODE) {
      expect(info.name).toBe('tensorflow');
      return;
    }
    expect(info.name).toBe('wasm');
    expect(info.skipped[1]).toBe(
      "webgpu: adapter 'null-backend' is a software renderer (null-backend) on the CPU, not a GPU",
    );
    expect(tf.getBackend()).toBe('wasm');
  });

  it('webgpu route - a forced webgpu starts on a software adapter and says it runs on the CPU', async () => {
    const info = await selectBackend('webgpu', { dawnOptions: NULL_BACKEND });
    expect(info).toEqual({
      name: 'webgpu',
      kind: 'cpu',
      simd: false,
      threads: 1,
      device: 'null-backend',
      skipped: [],
    });
    expect(tf.getBackend()).toBe('webgpu');
    // Our conv2d filter gradient stands in front of the backend's own.
    const own = backendKernelBehind(tf.Conv2DBackpropFilter, 'webgpu');
    expect(own?.backendName).toBe('webgpu');
    expect(tf.getKernel(tf.Conv2DBackpropFilter, 'webgpu')).not.toBe(own);
    // Started once per process: later calls reuse the adapter and still judge it.
    expect((await selectBackend('webgpu')).device).toBe('null-backend');
    const auto = await selectBackend('');
    expect(auto.name).not.toBe('webgpu');
    expect(auto.skipped).toContain(
      "webgpu: adapter 'null-backend' is a software renderer (null-backend) on the CPU, not a GPU",
    );
  });

  it('webgpu route - the learner runs its whole cycle on a webgpu device without a synchronous read', async () => {
    await selectBackend('webgpu', { dawnOptions: NULL_BACKEND });
    const warnings: unknown[] = [];
    const warn = console.warn;
    console.warn = (...args: unknown[]) => warnings.push(...args);
    const dir = await mkdtemp(join(tmpdir(), 'tributary-webgpu-'));
    try {
      for (const spec of SPECS) {
        for (const mode of ['gradient', 'delta'] as const) {
          const before = tf.memory().numTensors;
          const learner = new TfjsLearner({ mode });
          await learner.initialize(spec);
          expect(tf.getBackend()).toBe('webgpu');
          const params = await learner.getParams();
          learner.setParams(params);
          const batch = batchFor(spec, 6);
          await learner.train(batch);
          await learner.train(batch);
          const update = await learner.getUpdate();
          expect(update.map((t) => [t.name, t.data.length])).toEqual(params.map((p) => [p.name, p.data.length]));
          expect(await learner.getUpdate()).toBe(update);
          const scored = await learner.evaluate(batch);
          expect(scored.samples).toBe(6);
          await saveLayersModel(learner.model, dir);
          (await loadLayersModelFromDir(dir)).dispose();
          learner.shutdown();
          expect(tf.memory().numTensors).toBe(before);
        }
      }
      // tfjs-backend-webgpu warns once when something reads synchronously, which under Node
      // fails (it reads through an OffscreenCanvas).
      expect(warnings.join('\n')).not.toMatch(/synchronously reading/);
    } finally {
      console.warn = warn;
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('webgpu Vulkan loader check', () => {
  it('webgpu adapter - the Vulkan loader is looked for on Linux only, in LD_LIBRARY_PATH as well', async () => {
    expect(vulkanLoaderPresent('darwin', '')).toBe(true);
    const dir = await mkdtemp(join(tmpdir(), 'tributary-vulkan-'));
    try {
      await writeFile(join(dir, 'libvulkan.so.1'), '');
      expect(vulkanLoaderPresent('linux', `/nonexistent:${dir}`)).toBe(true);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  (vulkanLoaderPresent() ? it.skip : it)(
    'webgpu adapter - without the Vulkan loader the route is passed over before Dawn loads, naming it',
    async () => {
      await expect(WebgpuAdapter.find()).rejects.toThrow(/webgpu: no Vulkan loader \(libvulkan\.so\.1\)/);
      // Dawn's null backend needs no Vulkan, so asking for it still reaches Dawn.
      if (HAS_WEBGPU) await expect(WebgpuAdapter.find(NULL_BACKEND)).resolves.toBeInstanceOf(WebgpuAdapter);
    },
  );
});
