import {
  _FusedMatMul,
  Add,
  BatchMatMul,
  Conv2DBackpropFilter,
  Conv2DBackpropInput,
  getKernel,
  registerGradient,
  registerKernel,
  Sum,
  unregisterKernel,
  type GradConfig,
  type KernelConfig,
} from '@tensorflow/tfjs';
import { batchMatMulConfig, fusedMatMulConfig } from './batch-mat-mul.js';
import { addConfig, sumConfig } from './channel-bias.js';
import { conv2dBackpropFilterConfig } from './conv2d-backprop-filter.js';
import { conv2dBackpropFilterByProductsConfig } from './conv2d-backprop-filter-by-products.js';
import { conv2dBackpropInputConfig } from './conv2d-backprop-input.js';
import { depthwiseConv2dBackpropFilterConfig } from './depthwise-conv2d-backprop-filter.js';
import { depthwiseConv2dBackpropInputConfig } from './depthwise-conv2d-backprop-input.js';
import { identityConfig } from './identity.js';
import { maxPoolGradConfig } from './max-pool-grad.js';
import { reluGradConfig, reluGradKernelConfig, reluGradKernelGradConfig } from './relu-grad.js';

/**
 * Kernels the wasm backend lacks but training needs: the filter gradient of conv2d, and both
 * gradients of depthwise conv2d (separable and depthwise layers in topology models). Each is
 * registered only where the backend has none.
 */
export const WASM_MISSING_KERNELS: readonly KernelConfig[] = [
  conv2dBackpropFilterConfig,
  depthwiseConv2dBackpropFilterConfig,
  depthwiseConv2dBackpropInputConfig,
];

/**
 * Kernels whose wasm version gives wrong results (MaxPoolGrad) or copies where it need not
 * (Identity); ours replace them.
 */
export const WASM_REPLACED_KERNELS: readonly KernelConfig[] = [maxPoolGradConfig, identityConfig];

/** A kernel the wasm backend computes right but slowly, and ours that stands in front of it. */
export interface FrontedKernel {
  kernelName: string;
  /** Our kernel, which hands over to `own` (the backend's) where it does not apply. */
  inFrontOf(own: KernelConfig): KernelConfig;
}

/** Backend kernels that ours stand in front of on the SIMD path. */
export const WASM_FRONTED_KERNELS: readonly FrontedKernel[] = [
  { kernelName: Conv2DBackpropInput, inFrontOf: conv2dBackpropInputConfig },
  { kernelName: BatchMatMul, inFrontOf: batchMatMulConfig },
  { kernelName: _FusedMatMul, inFrontOf: fusedMatMulConfig },
  { kernelName: Add, inFrontOf: addConfig },
  { kernelName: Sum, inFrontOf: sumConfig },
];

/** A gradient of ours, the kernel of ours it runs on the SIMD path, and that kernel's own gradient. */
export interface FusedGradient {
  gradient: GradConfig;
  kernel: KernelConfig;
  /** For second derivatives through the gradient. */
  kernelGradient: GradConfig;
}

/**
 * Gradients that TF.js computes in several kernels and ours in one, on the SIMD path (relu's).
 * A gradient is registered for every backend, as TF.js keeps one per operation: off the wasm
 * backend's SIMD path it computes TF.js's own expression.
 */
export const WASM_FUSED_GRADIENTS: readonly FusedGradient[] = [
  { gradient: reluGradConfig, kernel: reluGradKernelConfig, kernelGradient: reluGradKernelGradConfig },
];

/** The gradients of {@link WASM_FUSED_GRADIENTS} registered so far. */
const registeredGradients = new Set<GradConfig>();

/** Each front we registered, and the backend's own kernel behind it. */
const fronts = new WeakMap<KernelConfig, KernelConfig>();

/**
 * `backendName`'s own kernel behind our front for `kernelName`, or undefined when no front of
 * ours is registered for it (as a benchmark needs, to time the backend's kernel against ours).
 */
export function backendKernelBehind(kernelName: string, backendName = 'wasm'): KernelConfig | undefined {
  const current = getKernel(kernelName, backendName);
  return current === undefined ? undefined : fronts.get(current);
}

/**
 * Registers {@link WASM_MISSING_KERNELS} where absent, {@link WASM_REPLACED_KERNELS} in place of
 * the backend's own, {@link WASM_FRONTED_KERNELS} in front of the backend's own, and the gradients
 * of {@link WASM_FUSED_GRADIENTS} with their kernels. Idempotent. Returns the names of the kernels
 * registered by this call.
 */
export function registerWasmKernels(): string[] {
  const registered: string[] = [];
  for (const config of WASM_MISSING_KERNELS) {
    if (getKernel(config.kernelName, config.backendName) !== undefined) continue;
    registerKernel(config);
    registered.push(config.kernelName);
  }
  for (const config of WASM_REPLACED_KERNELS) {
    const current = getKernel(config.kernelName, config.backendName);
    if (current === config) continue;
    if (current !== undefined) unregisterKernel(config.kernelName, config.backendName);
    registerKernel(config);
    registered.push(config.kernelName);
  }
  registered.push(...registerFronts(WASM_FRONTED_KERNELS, 'wasm'));
  for (const { gradient, kernel, kernelGradient } of WASM_FUSED_GRADIENTS) {
    if (registeredGradients.has(gradient)) continue;
    if (getKernel(kernel.kernelName, kernel.backendName) === undefined) registerKernel(kernel);
    registerGradient(kernelGradient);
    registerGradient(gradient);
    registeredGradients.add(gradient);
    registered.push(kernel.kernelName);
  }
  return registered;
}

/**
 * Registers each of `kernels` in front of `backendName`'s own kernel of that name, where that
 * backend has one and ours is not there yet. Returns the names registered.
 */
function registerFronts(kernels: readonly FrontedKernel[], backendName: string): string[] {
  const registered: string[] = [];
  for (const { kernelName, inFrontOf } of kernels) {
    const own = getKernel(kernelName, backendName);
    if (own === undefined || fronts.has(own)) continue;
    const front = inFrontOf(own);
    unregisterKernel(kernelName, backendName);
    registerKernel(front);
    fronts.set(front, own);
    registered.push(kernelName);
  }
  return registered;
}

/** Backend kernels of TF.js's webgpu backend that ours stand in front of. */
export const WEBGPU_FRONTED_KERNELS: readonly FrontedKernel[] = [
  { kernelName: Conv2DBackpropFilter, inFrontOf: conv2dBackpropFilterByProductsConfig },
];

/**
 * Registers {@link WEBGPU_FRONTED_KERNELS} in front of the webgpu backend's own, once that
 * backend's kernels are registered (its package loaded). Idempotent. Returns the names of the
 * kernels registered by this call.
 */
export function registerWebgpuKernels(): string[] {
  return registerFronts(WEBGPU_FRONTED_KERNELS, 'webgpu');
}
