import type { KernelConfig, KernelFunc, TensorInfo } from '@tensorflow/tfjs';

/** A backend as a kernel of ours that makes intermediate tensors needs it: to dispose of them. */
export interface DisposingBackend {
  disposeData(dataId: TensorInfo['dataId']): boolean;
}

/**
 * A kernel of ours standing in front of `own`, a backend's kernel of the same name (the wasm
 * backend's, or webgpu's): `ours` computes what it takes and returns undefined for everything
 * else, which goes to `own`, whose backend, set-up and disposal the front keeps.
 */
export function frontOf<Args>(own: KernelConfig, ours: (args: Args) => TensorInfo | undefined): KernelConfig {
  return {
    kernelName: own.kernelName,
    backendName: own.backendName,
    setupFunc: own.setupFunc,
    disposeFunc: own.disposeFunc,
    kernelFunc: ((args: Args) => ours(args) ?? own.kernelFunc(args as never)) as unknown as KernelFunc,
  };
}
