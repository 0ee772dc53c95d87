/**
 * `clone`: samples/s of the learner step of the MLP and the CNN on the wasm backend with our
 * `Identity` kernel, which shares a cloned tensor's memory, against the same step with the wasm
 * build's own, which copies it (TF.js clones every tensor a kernel saves for its gradient). Both
 * are measured in this run, in paired rounds (see `paired-rounds`).
 */
import { Identity, type KernelConfig, type KernelFunc, type TensorInfo } from '@tensorflow/tfjs';
import * as tf from '@tensorflow/tfjs';
import { selectBackend, WASM_REPLACED_KERNELS } from '#libs/learner';
import type { BenchResult } from '../bench-result.js';
import { comparePairedKernels } from './paired-rounds.js';

/** Target: sharing is no slower than copying. */
const TARGET_RATIO = 1;

/** What the copy needs of the wasm backend. */
interface WasmBackend {
  makeOutput(shape: number[], dtype: TensorInfo['dtype']): TensorInfo;
  typedArrayFromHeap(info: TensorInfo): Float32Array | Int32Array | Uint8Array;
}

/** The wasm build's own Identity: a new output, and the input's values copied into it. */
function copyingIdentity({ inputs, backend }: { inputs: { x: TensorInfo }; backend: WasmBackend }): TensorInfo {
  const { x } = inputs;
  const out = backend.makeOutput([...x.shape], x.dtype);
  backend.typedArrayFromHeap(out).set(backend.typedArrayFromHeap(x));
  return out;
}

const COPYING: KernelConfig = {
  kernelName: Identity,
  backendName: 'wasm',
  kernelFunc: copyingIdentity as unknown as KernelFunc,
};

export async function runCloneStepBench(say: (line: string) => void): Promise<BenchResult[]> {
  await selectBackend('wasm');
  const sharing = WASM_REPLACED_KERNELS.find((k) => k.kernelName === Identity);
  if (sharing === undefined || tf.getKernel(Identity, 'wasm') !== sharing) {
    throw new Error('our Identity kernel is not registered for wasm');
  }
  return comparePairedKernels(
    {
      kernelName: Identity,
      ours: { label: 'share', config: sharing },
      baseline: { label: 'copy', config: COPYING },
      resultName: (label) => `clone: ${label} on wasm, Identity sharing memory vs copying it`,
      target: TARGET_RATIO,
    },
    say,
  );
}
