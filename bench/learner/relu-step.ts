/**
 * `relu`: samples/s of the learner step of the MLP and the CNN on the wasm backend with relu's
 * gradient as our one SIMD128 kernel, against the same step with TF.js's own gradient (Step, Cast
 * and Multiply), as before. Both are measured in this run, in paired rounds (see `paired-rounds`).
 */
import * as tf from '@tensorflow/tfjs';
import { Relu, type GradConfig } from '@tensorflow/tfjs';
import { selectBackend, tfjsReluGradient, WASM_FUSED_GRADIENTS } from '#libs/learner';
import type { BenchResult } from '../bench-result.js';
import { comparePairedRounds } from './paired-rounds.js';

/** Target: ours is no slower than TF.js's. */
const TARGET_RATIO = 1;

/** TF.js's own gradient of relu. */
const TFJS_RELU_GRAD: GradConfig = {
  kernelName: Relu,
  inputsToSave: ['x'],
  gradFunc: (dy, saved) => {
    const [x] = saved as [tf.Tensor];
    return { x: () => tfjsReluGradient(dy as tf.Tensor, x) };
  },
};

export async function runReluStepBench(say: (line: string) => void): Promise<BenchResult[]> {
  await selectBackend('wasm');
  const ours = WASM_FUSED_GRADIENTS.find(({ gradient }) => gradient.kernelName === Relu)?.gradient;
  if (ours === undefined) throw new Error("our gradient of Relu is not among the wasm backend's fused gradients");
  try {
    return await comparePairedRounds(
      {
        ours: { label: 'ours', use: () => tf.registerGradient(ours) },
        baseline: { label: 'TF.js', use: () => tf.registerGradient(TFJS_RELU_GRAD) },
        resultName: (label) => `relu: ${label} on wasm, relu's gradient by our SIMD128 kernel vs TF.js's three kernels`,
        target: TARGET_RATIO,
      },
      say,
    );
  } finally {
    tf.registerGradient(ours);
  }
}
