import * as tf from '@tensorflow/tfjs';
import { byteConversion } from './byte-features.js';
import { simdKernelsFor } from './kernels/kernel-path.js';
import { heapAddress, withScratch, type WasmHeapBackend } from './kernels/wasm-heap.js';

/**
 * Input tensors made from minibatches' uint8 features (`Batch.featureBytes`). On the wasm backend
 * with our SIMD128 kernels, the bytes are copied onto the backend's heap and converted there,
 * straight into the tensor: a minibatch of the example's 64 images then crosses memory as 50 KB
 * of bytes, where a float32 minibatch is converted into an array of its own and copied (200 KB)
 * onto the heap by `tf.tensor`. Elsewhere the bytes are converted into an array kept for the
 * next minibatch and `tf.tensor` copies that. Either way the values are those the trainer's
 * reader would have converted (`byteConversion`), to the bit.
 */
export class ByteFeatureTensors {
  /** Where the bytes are converted off the wasm heap; grown as minibatches need. */
  private scratch = new Float32Array(0);

  /** The float32 tensor of `shape` holding `bytes[i] * scale`. */
  tensor(bytes: Uint8Array, shape: number[], scale: number): tf.Tensor {
    const n = bytes.length;
    if (tf.getBackend() === 'wasm') {
      const backend = tf.backend() as unknown as WasmHeapBackend;
      const kernels = simdKernelsFor(backend);
      if (kernels !== undefined) return onHeap(backend, kernels.bytesToF32, bytes, shape, scale);
    }
    if (this.scratch.length < n) this.scratch = new Float32Array(n);
    byteConversion().convert(bytes, this.scratch, n, scale);
    return tf.tensor(this.scratch.subarray(0, n), shape, 'float32');
  }
}

/** The conversion on the wasm backend's heap, into a tensor it allocates. */
function onHeap(
  backend: WasmHeapBackend,
  convert: (bytes: number, out: number, n: number, scale: number) => void,
  bytes: Uint8Array,
  shape: number[],
  scale: number,
): tf.Tensor {
  return withScratch(backend, bytes.length, (at) => {
    const out = backend.makeOutput(shape, 'float32');
    const tensor = tf.engine().makeTensorFromTensorInfo(out);
    try {
      // The heap's view is taken after the allocations, which may have grown the memory.
      backend.wasm.HEAPU8.set(bytes, at);
      convert(at, heapAddress(backend, out), bytes.length, scale);
    } catch (err) {
      tensor.dispose();
      throw err;
    }
    return tensor;
  });
}
