import * as tf from '@tensorflow/tfjs';
import { KERNELS_ENV_VAR } from '#libs/wasm-simd';
import { BACKEND_CHOICES, BACKEND_ENV_VAR, selectBackend, selectWasmKernels } from './backend.js';
import { BackendUnavailableError } from './errors.js';
import { isResolvable } from './optional-package.js';
import { WebgpuAdapter } from './webgpu-adapter.js';

const HAS_TFJS_NODE_GPU = isResolvable('@tensorflow/tfjs-node-gpu');
const HAS_TFJS_NODE = isResolvable('@tensorflow/tfjs-node') || HAS_TFJS_NODE_GPU;

/**
 * What this machine's WebGPU route offers, asked of the real packages once: an adapter that
 * is a GPU, one that is a software renderer, or the reason there is none. The expectations
 * below follow it, so the file holds on a machine with a GPU as on one without.
 */
type WebgpuHere = { kind: 'gpu' | 'software'; adapter: WebgpuAdapter } | { kind: 'none'; reason: string };

async function webgpuHere(): Promise<WebgpuHere> {
  try {
    const adapter = await WebgpuAdapter.find();
    return { kind: adapter.software === undefined ? 'gpu' : 'software', adapter };
  } catch (error) {
    return { kind: 'none', reason: (error as Error).message };
  }
}

const webgpu = await webgpuHere();
const noWebgpuReason = webgpu.kind === 'none' ? webgpu.reason : undefined;

describe('backend', () => {
  const savedEnv = process.env[BACKEND_ENV_VAR];

  afterEach(() => {
    if (savedEnv === undefined) delete process.env[BACKEND_ENV_VAR];
    else process.env[BACKEND_ENV_VAR] = savedEnv;
  });

  it('backend - the choices are tensorflow, webgpu, wasm and cpu', () => {
    expect(BACKEND_CHOICES).toEqual(['tensorflow', 'webgpu', 'wasm', 'cpu']);
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

  it('backend - an unknown backend is refused with the choices', async () => {
    await expect(selectBackend('webgl')).rejects.toThrow(BackendUnavailableError);
    await expect(selectBackend('webgl')).rejects.toThrow(
      /unknown backend 'webgl' \(from the caller\); expected one of tensorflow, webgpu, wasm, cpu/,
    );
  });

  it('backend - the webgpu probe fails with a reason or finds an adapter, and never throws anything else', () => {
    if (webgpu.kind === 'none') {
      expect(webgpu.reason).toMatch(/^webgpu: /);
      if (!isResolvable('webgpu')) expect(webgpu.reason).toMatch(/not installed/);
    } else {
      expect(webgpu.adapter.description).not.toBe('');
    }
  });

  it('backend - without a preference the fastest available backend wins, and each one passed over says why', async () => {
    delete process.env[BACKEND_ENV_VAR];
    const info = await selectBackend();
    expect(tf.getBackend()).toBe(info.name);
    if (HAS_TFJS_NODE || webgpu.kind === 'gpu') {
      expect(['tensorflow', 'webgpu']).toContain(info.name);
      return;
    }
    expect(info.name).toBe('wasm');
    expect(info.skipped).toEqual([
      '@tensorflow/tfjs-node-gpu: not installed',
      webgpu.kind === 'none'
        ? webgpu.reason
        : `webgpu: adapter '${webgpu.adapter.description}' is ${webgpu.adapter.software!}`,
      '@tensorflow/tfjs-node: not installed',
    ]);
  });

  (HAS_TFJS_NODE ? it.skip : it)(
    'backend - forcing tensorflow without tfjs-node is an error, not a fallback',
    async () => {
      await expect(selectBackend('tensorflow')).rejects.toThrow(
        /no TensorFlow native binding is installed \(@tensorflow\/tfjs-node-gpu: not installed; @tensorflow\/tfjs-node: not installed\)/,
      );
    },
  );

  (noWebgpuReason !== undefined ? it : it.skip)(
    'backend - forcing webgpu without an adapter is an error naming why, not a fallback',
    async () => {
      const before = tf.getBackend();
      await expect(selectBackend('webgpu')).rejects.toThrow(BackendUnavailableError);
      await expect(selectBackend('webgpu')).rejects.toThrow(noWebgpuReason!);
      process.env[BACKEND_ENV_VAR] = 'webgpu';
      await expect(selectBackend()).rejects.toThrow(noWebgpuReason!);
      expect(tf.getBackend()).toBe(before);
    },
  );

  (noWebgpuReason === undefined ? it : it.skip)(
    'backend - forcing webgpu on an adapter starts the webgpu backend',
    async () => {
      const info = await selectBackend('webgpu');
      expect(tf.getBackend()).toBe('webgpu');
      expect(info).toMatchObject({ name: 'webgpu', kind: webgpu.kind === 'gpu' ? 'gpu' : 'cpu', skipped: [] });
      expect(await tf.tidy(() => tf.add(tf.scalar(2), tf.scalar(3))).data()).toEqual(new Float32Array([5]));
    },
  );
});
