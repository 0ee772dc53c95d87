import fc from 'fast-check';
import {
  HEAP_ALIGNMENT_BYTES,
  KernelHeap,
  KernelHeapExhaustedError,
  NotHeapAllocationError,
  WASM_PAGE_BYTES,
  type HeapArray,
} from './index.js';

function overlaps(a: HeapArray, b: HeapArray): boolean {
  return a.byteOffset < b.byteOffset + b.byteLength && b.byteOffset < a.byteOffset + a.byteLength;
}

describe('kernel heap', () => {
  it('kernel heap - arrays are aligned, apart, and stay valid while the memory grows', () => {
    const heap = new KernelHeap({ initialPages: 1, maximumPages: 64 });
    const small = heap.allocateFloat32(3);
    small.set([1, 2, 3]);
    const large = heap.allocateFloat64((3 * WASM_PAGE_BYTES) / 8);
    expect(heap.heapBytes).toBeGreaterThan(WASM_PAGE_BYTES);
    expect(Array.from(small)).toEqual([1, 2, 3]);
    large[large.length - 1] = 7;
    small[0] = 5;
    expect(new Float32Array(heap.memory.buffer, small.byteOffset, 3)[0]).toBe(5);
    for (const a of [small, large]) {
      expect(a.byteOffset % HEAP_ALIGNMENT_BYTES).toBe(0);
      expect(heap.holds(a)).toBe(true);
    }
    expect(overlaps(small, large)).toBe(false);
    expect(heap.holds(new Float32Array(3))).toBe(false);
  });

  it('kernel heap - freed ranges are reused and merged, so giving everything back leaves one free range', () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ length: fc.integer({ min: 0, max: 5000 }), double: fc.boolean(), keep: fc.boolean() }), {
          maxLength: 40,
        }),
        (requests) => {
          const heap = new KernelHeap({ initialPages: 1, maximumPages: 256 });
          const live: HeapArray[] = [];
          for (const r of requests) {
            const a = r.double ? heap.allocateFloat64(r.length) : heap.allocateFloat32(r.length);
            expect(a.length).toBe(r.length);
            for (const other of live) if (a.length > 0 && other.length > 0) expect(overlaps(a, other)).toBe(false);
            if (r.keep) live.push(a);
            else heap.free(a);
          }
          for (const a of live) heap.free(a);
          expect(heap.allocationCount).toBe(0);
          expect(heap.usedBytes).toBe(0);
          // One free range spans the memory: an array as large as the whole of it needs no growth.
          const size = heap.heapBytes;
          heap.allocateFloat32(size / 4);
          expect(heap.heapBytes).toBe(size);
        },
      ),
      { numRuns: 100 },
    );
  });

  it('kernel heap - giving back an array it did not hand out, twice, or in part is refused', () => {
    const heap = new KernelHeap();
    const a = heap.allocateFloat32(8);
    expect(() => heap.free(new Float32Array(8))).toThrow(NotHeapAllocationError);
    expect(() => heap.free(new Float32Array(8))).toThrow(/not in the kernel heap/);
    expect(() => heap.free(a.subarray(0, 4))).toThrow(/give back the array as allocated/);
    expect(() => heap.free(a.subarray(4))).toThrow(/is not allocated/);
    heap.free(a);
    expect(() => heap.free(a)).toThrow(/given back twice/);
    heap.free(heap.allocateFloat32(0));
  });

  it('kernel heap - an array beyond the maximum is refused with the sizes named, and the heap goes on', () => {
    const heap = new KernelHeap({ initialPages: 1, maximumPages: 2 });
    const a = heap.allocateFloat32(WASM_PAGE_BYTES / 4);
    expect(() => heap.allocateFloat32(WASM_PAGE_BYTES)).toThrow(KernelHeapExhaustedError);
    expect(() => heap.allocateFloat32(WASM_PAGE_BYTES)).toThrow(`no room for ${4 * WASM_PAGE_BYTES} bytes`);
    heap.free(a);
    expect(heap.allocateFloat32((2 * WASM_PAGE_BYTES) / 4).length).toBe(WASM_PAGE_BYTES / 2);
  });
});
