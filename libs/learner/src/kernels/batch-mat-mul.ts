import { broadcast_util, util, type KernelConfig, type TensorInfo } from '@tensorflow/tfjs';
import { frontOf } from './front.js';
import { simdKernelsFor } from './kernel-path.js';
import { heapAddress, withScratch, type WasmHeapBackend } from './wasm-heap.js';

interface BatchMatMulArgs {
  inputs: { a: TensorInfo; b: TensorInfo };
  backend: WasmHeapBackend;
  attrs: { transposeA: boolean; transposeB: boolean };
}

/**
 * The product by our SIMD kernel, or undefined where it does not apply (then the backend's):
 * only for float32 batches that are equal or broadcast from one.
 */
function batchMatMulSimd({ inputs, backend, attrs }: BatchMatMulArgs): TensorInfo | undefined {
  const { a, b } = inputs;
  const { transposeA, transposeB } = attrs;
  if (a.dtype !== 'float32' || b.dtype !== 'float32' || a.shape.length < 2 || b.shape.length < 2) return undefined;
  const simd = simdKernelsFor(backend);
  if (simd === undefined) return undefined;
  const aRank = a.shape.length;
  const bRank = b.shape.length;
  const m = a.shape[transposeA ? aRank - 1 : aRank - 2]!;
  const k = a.shape[transposeA ? aRank - 2 : aRank - 1]!;
  const n = b.shape[transposeB ? bRank - 2 : bRank - 1]!;
  if (b.shape[transposeB ? bRank - 1 : bRank - 2] !== k) return undefined;
  const outerA = a.shape.slice(0, -2);
  const outerB = b.shape.slice(0, -2);
  const batchA = util.sizeFromShape(outerA);
  const batchB = util.sizeFromShape(outerB);
  // Equal outer shapes, or one side a single matrix: anything else is the backend's to refuse.
  const sameOuter = outerA.length === outerB.length && outerA.every((d, i) => d === outerB[i]);
  if (!sameOuter && batchA !== 1 && batchB !== 1) return undefined;
  if ([m, k, n, batchA, batchB].some((d) => d === 0)) return undefined;
  const outer = broadcast_util.assertAndGetBroadcastShape(outerA, outerB);
  const out = backend.makeOutput([...outer, m, n], 'float32');
  // Transposed copies, then the list of a pair of rows' nonzero positions (k int32s).
  const scratchFloats = (transposeA ? m * k : 0) + (transposeB ? k * n : 0);
  const product = (scratch: number): void => {
    simd.batchMatMul(
      heapAddress(backend, a),
      heapAddress(backend, b),
      heapAddress(backend, out),
      scratch,
      scratch + scratchFloats * 4,
      batchA,
      batchB,
      m,
      k,
      n,
      transposeA ? 1 : 0,
      transposeB ? 1 : 0,
    );
  };
  withScratch(backend, (scratchFloats + k) * 4, product);
  return out;
}

/**
 * `BatchMatMul` for the wasm backend, standing in front of `own`, the backend's kernel. On the
 * SIMD path float32 products come from our SIMD128 kernel: the backend computes those with a
 * transposed operand (a dense layer's gradients, x^T dy and dy W^T) in a scalar loop, and hands
 * the others to XNNPACK, which packs the right operand anew whenever it is a new tensor. In
 * training it is one on every step (a dense layer's kernel after each update), and the packing
 * made the backend's product of a 64 x 784 batch by a 784 x 128 kernel take 1.1-1.4 ms against
 * 0.6-0.7 ms for ours; with the same kernel again (inference) the two are as fast. Everything
 * else, and everything on the plain JavaScript path, goes to `own` (whose set-up it keeps).
 */
export function batchMatMulConfig(own: KernelConfig): KernelConfig {
  return frontOf(own, batchMatMulSimd);
}

interface FusedMatMulArgs {
  inputs: { a: TensorInfo; b: TensorInfo; bias?: TensorInfo; preluActivationWeights?: TensorInfo };
  backend: WasmHeapBackend;
  attrs: { transposeA: boolean; transposeB: boolean; activation: string; leakyreluAlpha?: number };
}

/**
 * A dense layer's product with its bias and relu (or no activation) by our SIMD kernel, or
 * undefined where it does not apply: other activations, and a bias that is not one value per
 * output column (which the backend refuses too).
 */
function fusedMatMulSimd({ inputs, backend, attrs }: FusedMatMulArgs): TensorInfo | undefined {
  const { a, b, bias, preluActivationWeights } = inputs;
  const { transposeA, transposeB, activation } = attrs;
  if (preluActivationWeights !== undefined || (activation !== 'linear' && activation !== 'relu')) return undefined;
  const n = b.shape[transposeB ? b.shape.length - 2 : b.shape.length - 1]!;
  if (bias !== undefined && (bias.dtype !== 'float32' || bias.shape.length !== 1 || bias.shape[0] !== n)) {
    return undefined;
  }
  const out = batchMatMulSimd({ inputs: { a, b }, backend, attrs: { transposeA, transposeB } });
  if (out === undefined || (bias === undefined && activation === 'linear')) return out;
  const simd = simdKernelsFor(backend)!;
  const rows = util.sizeFromShape(out.shape) / n;
  const product = heapAddress(backend, out);
  if (bias === undefined) {
    // Relu alone: the kernel with a bias of zeros.
    withScratch(backend, n * 4, (zeros) => {
      backend.wasm.HEAPU8.fill(0, zeros, zeros + n * 4);
      simd.biasRelu(product, zeros, product, rows, n);
    });
  } else {
    const kernel = activation === 'relu' ? simd.biasRelu : simd.biasAdd;
    kernel(product, heapAddress(backend, bias), product, rows, n);
  }
  return out;
}

/**
 * `_FusedMatMul` (a dense layer's product, bias and activation in one, as TF.js runs a layer
 * outside training) for the wasm backend, standing in front of `own`: on the SIMD path, the
 * float32 products with a bias per column and relu or no activation come from our SIMD128
 * kernels: the product, which leaves out the zeros of the layer's input (the backend's XNNPACK
 * computes them all), then the bias and relu over it in place (in a plain loop they took a sixth
 * of scoring the 10,000 Fashion-MNIST test images with the example MLP); everything else goes
 * to `own`.
 */
export function fusedMatMulConfig(own: KernelConfig): KernelConfig {
  return frontOf(own, fusedMatMulSimd);
}
