import { Identity, type KernelConfig, type KernelFunc, type TensorInfo } from '@tensorflow/tfjs';

/** The part of the wasm backend that shares a tensor's memory: its reference count. */
interface RefCountingBackend {
  incRef(dataId: TensorInfo['dataId']): void;
}

/**
 * Identity (what `tf.clone` runs, and what the engine runs on every tensor a kernel saves for
 * its gradient) as the cpu and webgl backends compute it: the output shares the input's memory,
 * counted once more, where the wasm backend's own copies it into new memory every time. Sharing
 * made the learner's step 1.02-1.08x as fast on the MLP and 1.08-1.11x on the CNN
 * (`npm run bench -- clone`, three runs). Kernels never write their inputs, so a shared buffer is never told
 * apart from a copy; the backend frees it when the last tensor on it is disposed, as it does for
 * a reshape. (The one tensor written in place, a `WasmHeapOptimizer` state slot, is never cloned.)
 */
function identity({ inputs, backend }: { inputs: { x: TensorInfo }; backend: RefCountingBackend }): TensorInfo {
  const { x } = inputs;
  backend.incRef(x.dataId);
  return { dataId: x.dataId, shape: x.shape, dtype: x.dtype };
}

export const identityConfig: KernelConfig = {
  kernelName: Identity,
  backendName: 'wasm',
  kernelFunc: identity as unknown as KernelFunc,
};
