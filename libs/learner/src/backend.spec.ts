import * as tf from '@tensorflow/tfjs';
import { createRequire } from 'node:module';
import { KERNELS_ENV_VAR } from '#libs/wasm-simd';
import { BACKEND_ENV_VAR, selectBackend, selectWasmKernels } from './backend.js';
import { BackendUnavailableError } from './errors.js';

function installed(pkg: string): boolean {
  try {
    createRequire(import.meta.url).resolve(pkg);
    return true;
  } catch {
    return false;
  }
}

const HAS_TFJS_NODE = installed('@tensorflow/tfjs-node') || installed('@tensorflow/tfjs-node-gpu');

describe('backend', () => {
  const savedEnv = process.env[BACKEND_ENV_VAR];

  afterEach(() => {
    if (savedEnv === undefined) delete process.env[BACKEND_ENV_VAR];
    else process.env[BACKEND_ENV_VAR] = savedEnv;
  });

  it('backend - wasm can be chosen and reports SIMD', async () => {
    const info = await selectBackend('wasm');
    expect(tf.getBackend()).toBe('wasm');
    expect(info).toMatchObject({ name: 'wasm', threads: expect.any(Number) as number });
    expect(info.kind).toBe(info.simd ? 'wasm-simd' : 'wasm');
    // The wasm backend computes through the single @tensorflow/tfjs instance.
    expect(tf.tidy(() => tf.add(tf.scalar(2), tf.scalar(3)).dataSync()[0])).toBe(5);
  });

  it('backend - on wasm it says which kernel path runs, and the kernels can be chosen again', async () => {
    const info = await selectBackend('wasm');
    if (process.env[KERNELS_ENV_VAR] === 'js') {
      expect(info.kernels).toEqual({ path: 'js', reason: 'TRIBUTARY_KERNELS=js' });
    } else {
      expect(info.kernels).toEqual({ path: 'wasm-simd' });
    }
    expect(selectWasmKernels('js')).toEqual({ path: 'js', reason: 'asked for by the caller' });
    expect(selectWasmKernels('wasm-simd')).toEqual({ path: 'wasm-simd' });
    expect((await selectBackend('cpu')).kernels).toBeUndefined();
  });

  it('backend - the environment variable forces the plain JS backend', async () => {
    process.env[BACKEND_ENV_VAR] = 'cpu';
    expect(await selectBackend()).toEqual({ name: 'cpu', kind: 'cpu', simd: false, threads: 1, skipped: [] });
    expect(tf.getBackend()).toBe('cpu');
  });

  it('backend - auto or an empty preference defers to the environment variable', async () => {
    process.env[BACKEND_ENV_VAR] = 'cpu';
    expect((await selectBackend('auto')).name).toBe('cpu');
    expect((await selectBackend('')).name).toBe('cpu');
    process.env[BACKEND_ENV_VAR] = 'gpu';
    await expect(selectBackend('')).rejects.toThrow(/unknown backend 'gpu' \(from TRIBUTARY_BACKEND\)/);
  });

  it('backend - an unknown backend is refused', async () => {
    await expect(selectBackend('webgpu')).rejects.toThrow(BackendUnavailableError);
    await expect(selectBackend('webgpu')).rejects.toThrow(/unknown backend 'webgpu' \(from the caller\)/);
  });

  it('backend - without a preference the fastest available backend wins', async () => {
    delete process.env[BACKEND_ENV_VAR];
    const info = await selectBackend();
    expect(tf.getBackend()).toBe(info.name);
    if (HAS_TFJS_NODE) {
      expect(info.name).toBe('tensorflow');
    } else {
      expect(info.name).toBe('wasm');
      expect(info.skipped).toHaveLength(1);
      expect(info.skipped[0]).toMatch(/no TensorFlow native binding is installed/);
    }
  });

  (HAS_TFJS_NODE ? it.skip : it)(
    'backend - forcing tensorflow without tfjs-node is an error, not a fallback',
    async () => {
      await expect(selectBackend('tensorflow')).rejects.toThrow(/@tensorflow\/tfjs-node-gpu.*@tensorflow\/tfjs-node/);
    },
  );
});
