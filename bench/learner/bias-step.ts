/**
 * `bias`: samples/s of the learner step of the MLP and the CNN on the wasm backend with a layer's
 * bias added, and its gradient summed, by our SIMD128 kernels (`Add` and `Sum` fronts), against
 * the same step with both left to the backend's own kernels, as before. Both are measured in this
 * run, in paired rounds (see `paired-rounds`).
 */
import * as tf from '@tensorflow/tfjs';
import { Add, Sum, type KernelConfig } from '@tensorflow/tfjs';
import { backendKernelBehind, selectBackend } from '#libs/learner';
import type { BenchResult } from '../bench-result.js';
import { comparePairedRounds, useKernel } from './paired-rounds.js';

/** Target: ours is no slower than the backend's. */
const TARGET_RATIO = 1;

export async function runBiasStepBench(say: (line: string) => void): Promise<BenchResult[]> {
  await selectBackend('wasm');
  const kernels = [Add, Sum].map((name) => {
    const ours = tf.getKernel(name, 'wasm');
    const own = backendKernelBehind(name);
    if (ours === undefined || own === undefined)
      throw new Error(`our ${name} is not registered in front of the wasm backend`);
    return { ours, own };
  });
  const using = (pick: (k: { ours: KernelConfig; own: KernelConfig }) => KernelConfig) => () =>
    kernels.forEach((k) => useKernel(pick(k)));
  try {
    return await comparePairedRounds(
      {
        ours: { label: 'ours', use: using((k) => k.ours) },
        baseline: { label: 'backend', use: using((k) => k.own) },
        resultName: (label) => `bias: ${label} on wasm, bias add and gradient by our SIMD128 kernels vs the backend's`,
        target: TARGET_RATIO,
      },
      say,
    );
  } finally {
    using((k) => k.ours)();
  }
}
