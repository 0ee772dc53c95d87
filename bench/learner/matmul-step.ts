/**
 * `matmul`: samples/s of the learner step of the MLP and the CNN on the wasm backend with every
 * float32 `BatchMatMul` computed by our SIMD128 kernel, against the same step with the
 * untransposed products (a dense layer's forward pass, x W) handed to the backend's own kernel
 * (XNNPACK, which packs W anew for every new tensor, so on every training step), as before.
 * Transposed products are ours on both sides. Both are measured in this run, in paired rounds
 * (see `paired-rounds`).
 */
import * as tf from '@tensorflow/tfjs';
import { BatchMatMul, type KernelConfig, type KernelFunc } from '@tensorflow/tfjs';
import { backendKernelBehind, selectBackend } from '#libs/learner';
import type { BenchResult } from '../bench-result.js';
import { comparePairedKernels } from './paired-rounds.js';

/** Target: ours is no slower than the backend's. */
const TARGET_RATIO = 1;

type BatchMatMulKernel = (args: { attrs: { transposeA: boolean; transposeB: boolean } }) => unknown;

export async function runMatMulStepBench(say: (line: string) => void): Promise<BenchResult[]> {
  await selectBackend('wasm');
  const ours = tf.getKernel(BatchMatMul, 'wasm');
  const own = backendKernelBehind(BatchMatMul);
  if (ours === undefined || own === undefined) {
    throw new Error('our BatchMatMul is not registered in front of the wasm backend');
  }
  const oursFunc = ours.kernelFunc as unknown as BatchMatMulKernel;
  const ownFunc = own.kernelFunc as unknown as BatchMatMulKernel;
  const untransposedToBackend: KernelConfig = {
    ...ours,
    kernelFunc: ((args: Parameters<BatchMatMulKernel>[0]) =>
      args.attrs.transposeA || args.attrs.transposeB ? oursFunc(args) : ownFunc(args)) as unknown as KernelFunc,
  };
  return comparePairedKernels(
    {
      kernelName: BatchMatMul,
      ours: { label: 'ours', config: ours },
      baseline: { label: 'backend', config: untransposedToBackend },
      resultName: (label) => `matmul: ${label} on wasm, untransposed products by our SIMD128 kernel vs the backend's`,
      target: TARGET_RATIO,
    },
    say,
  );
}
