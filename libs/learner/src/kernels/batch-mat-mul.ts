import {
  BatchMatMul,
  broadcast_util,
  util,
  type KernelConfig,
  type KernelFunc,
  type TensorInfo,
} from '@tensorflow/tfjs';
import { simdKernelsFor } from './kernel-path.js';
import { heapAddress, withScratch, type WasmHeapBackend } from './wasm-heap.js';

interface BatchMatMulArgs {
  inputs: { a: TensorInfo; b: TensorInfo };
  backend: WasmHeapBackend;
  attrs: { transposeA: boolean; transposeB: boolean };
}

/**
 * The product by our SIMD kernel, or undefined where it does not apply (then the backend's):
 * only with an operand transposed, as the backend's untransposed product is already fast, and
 * only for float32 batches that are equal or broadcast from one.
 */
function batchMatMulSimd({ inputs, backend, attrs }: BatchMatMulArgs): TensorInfo | undefined {
  const { a, b } = inputs;
  const { transposeA, transposeB } = attrs;
  if (!transposeA && !transposeB) return undefined;
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
  const scratchFloats = (transposeA ? m * k : 0) + (transposeB ? k * n : 0);
  withScratch(backend, scratchFloats * 4, (scratch) =>
    simd.batchMatMul(
      heapAddress(backend, a),
      heapAddress(backend, b),
      heapAddress(backend, out),
      scratch,
      batchA,
      batchB,
      m,
      k,
      n,
      transposeA ? 1 : 0,
      transposeB ? 1 : 0,
    ),
  );
  return out;
}

/**
 * `BatchMatMul` for the wasm backend, standing in front of `own`, the backend's kernel: its
 * products with a transposed operand (a dense layer's gradients, x^T dy and dy W^T) are a scalar
 * loop, so on the SIMD path those come from our SIMD128 kernel; untransposed products, and
 * everything on the plain JavaScript path, still go to `own` (whose set-up it keeps).
 */
export function batchMatMulConfig(own: KernelConfig): KernelConfig {
  return {
    kernelName: BatchMatMul,
    backendName: 'wasm',
    setupFunc: own.setupFunc,
    disposeFunc: own.disposeFunc,
    kernelFunc: ((args: BatchMatMulArgs) =>
      batchMatMulSimd(args) ?? own.kernelFunc(args as never)) as unknown as KernelFunc,
  };
}
