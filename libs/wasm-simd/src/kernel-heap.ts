import { KernelHeapExhaustedError, NotHeapAllocationError } from './errors.js';

/** Bytes in one WebAssembly memory page. */
export const WASM_PAGE_BYTES = 65_536;
/** Most pages a 32-bit WebAssembly memory may have: 4 GiB. */
export const MAX_HEAP_PAGES = 65_536;
/** Alignment of every array the heap hands out: one SIMD128 vector. */
export const HEAP_ALIGNMENT_BYTES = 16;

/** Arrays the heap hands out and the kernels run on. */
export type HeapArray = Float32Array | Float64Array;

/** Sizes of a `KernelHeap`, in pages. */
export interface KernelHeapOptions {
  /** Pages at creation. Default 1. */
  initialPages?: number;
  /** Pages the memory may grow to. Default `MAX_HEAP_PAGES`. */
  maximumPages?: number;
}

interface FreeRange {
  offset: number;
  bytes: number;
}

/**
 * Arrays in one WebAssembly memory, which the kernel modules import as `env.memory`, so a
 * kernel reads and writes them where they are instead of copying them in and out.
 *
 * The memory is shared (threads proposal) for one reason: growing a shared memory never
 * detaches the `Float32Array`s already viewing it, so an array handed out stays valid for as
 * long as it is allocated, however much the heap grows later. Nothing runs on another thread.
 *
 * Allocation is first fit over a free list that merges neighbouring ranges, every array aligned
 * to 16 bytes. The heap never frees anything by itself: whoever allocates an array gives it back
 * with `free` once no reader can see it any more (a WebAssembly memory is invisible to the
 * garbage collector). A memory never shrinks either; freed ranges are reused.
 */
export class KernelHeap {
  /** The memory the kernel modules import. */
  readonly memory: WebAssembly.Memory;
  /** Bytes the memory may grow to. */
  readonly maximumBytes: number;
  /** Every `SharedArrayBuffer` the memory has been seen as: each growth gives a new, longer one. */
  private readonly buffers = new Set<ArrayBufferLike>();
  private current: SharedArrayBuffer;
  /** Allocations by byte offset: the bytes reserved and the byte length handed out. */
  private readonly allocations = new Map<number, { bytes: number; byteLength: number }>();
  /** Free ranges, by offset; never adjacent to each other. */
  private readonly freeRanges: FreeRange[] = [];
  private size: number;
  private used = 0;

  constructor(options: KernelHeapOptions = {}) {
    const initial = options.initialPages ?? 1;
    const maximum = options.maximumPages ?? MAX_HEAP_PAGES;
    this.memory = new WebAssembly.Memory({ initial, maximum, shared: true });
    this.maximumBytes = maximum * WASM_PAGE_BYTES;
    this.size = initial * WASM_PAGE_BYTES;
    this.current = this.memory.buffer as SharedArrayBuffer;
    this.buffers.add(this.current);
    if (this.size > 0) this.freeRanges.push({ offset: 0, bytes: this.size });
  }

  /** Bytes the memory holds now. */
  get heapBytes(): number {
    return this.size;
  }

  /** Bytes reserved by the arrays allocated now (each rounded up to the alignment). */
  get usedBytes(): number {
    return this.used;
  }

  /** Arrays allocated now. */
  get allocationCount(): number {
    return this.allocations.size;
  }

  /**
   * A new array of `length` float32 values in the heap. Its contents are unspecified (a reused
   * range keeps what it held): fill it before reading it.
   *
   * @throws KernelHeapExhaustedError when the memory cannot grow enough.
   */
  allocateFloat32(length: number): Float32Array {
    // Reserve first: it may grow the memory, which gives a new buffer to view.
    const offset = this.reserve(length, 4);
    return new Float32Array(this.current, offset, length);
  }

  /** A new array of `length` float64 values in the heap; as `allocateFloat32`. */
  allocateFloat64(length: number): Float64Array {
    const offset = this.reserve(length, 8);
    return new Float64Array(this.current, offset, length);
  }

  /** True when `array` views this heap's memory (allocated by it or a part of such an array). */
  holds(array: ArrayBufferView): boolean {
    return this.buffers.has(array.buffer);
  }

  /**
   * Gives an array from `allocateFloat32` or `allocateFloat64` back; the caller and everyone it
   * shared the array with must not use it any more. An empty array needs no giving back.
   *
   * @throws NotHeapAllocationError for an array the heap did not hand out as it is, or gave
   *   back already.
   */
  free(array: HeapArray): void {
    if (!this.holds(array)) throw new NotHeapAllocationError(array.byteOffset, 'is not in the kernel heap');
    if (array.byteLength === 0) return;
    const offset = array.byteOffset;
    const allocation = this.allocations.get(offset);
    if (!allocation) throw new NotHeapAllocationError(offset, 'is not allocated (given back twice?)');
    if (allocation.byteLength !== array.byteLength) {
      throw new NotHeapAllocationError(
        offset,
        `has ${array.byteLength} bytes but its allocation ${allocation.byteLength}: give back the array as allocated`,
      );
    }
    this.allocations.delete(offset);
    this.used -= allocation.bytes;
    this.release({ offset, bytes: allocation.bytes });
  }

  /** Reserves room for `length` elements of `elementBytes` each; returns its byte offset. */
  private reserve(length: number, elementBytes: number): number {
    if (!Number.isSafeInteger(length) || length < 0) throw new RangeError(`kernel heap: invalid length ${length}`);
    const byteLength = length * elementBytes;
    // Empty arrays take no room; they view the start of the memory, like any empty view.
    if (byteLength === 0) return 0;
    const bytes = Math.ceil(byteLength / HEAP_ALIGNMENT_BYTES) * HEAP_ALIGNMENT_BYTES;
    let index = this.freeRanges.findIndex((r) => r.bytes >= bytes);
    if (index < 0) {
      this.grow(bytes);
      index = this.freeRanges.length - 1;
    }
    const range = this.freeRanges[index];
    const offset = range.offset;
    if (range.bytes === bytes) this.freeRanges.splice(index, 1);
    else {
      range.offset += bytes;
      range.bytes -= bytes;
    }
    this.allocations.set(offset, { bytes, byteLength });
    this.used += bytes;
    return offset;
  }

  /** Grows the memory so that its last free range holds at least `bytes`. */
  private grow(bytes: number): void {
    const last = this.freeRanges.at(-1);
    const tail = last && last.offset + last.bytes === this.size ? last.bytes : 0;
    const pages = Math.ceil((bytes - tail) / WASM_PAGE_BYTES);
    if (this.size + pages * WASM_PAGE_BYTES > this.maximumBytes) {
      throw new KernelHeapExhaustedError(bytes, this.size);
    }
    try {
      this.memory.grow(pages);
    } catch (cause) {
      throw new KernelHeapExhaustedError(bytes, this.size, { cause });
    }
    const added = pages * WASM_PAGE_BYTES;
    if (last && tail > 0) last.bytes += added;
    else this.freeRanges.push({ offset: this.size, bytes: added });
    this.size += added;
    this.current = this.memory.buffer as SharedArrayBuffer;
    this.buffers.add(this.current);
  }

  /** Puts a range back into the free list, merged with the free ranges it touches. */
  private release(range: FreeRange): void {
    let lo = 0;
    let hi = this.freeRanges.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.freeRanges[mid].offset < range.offset) lo = mid + 1;
      else hi = mid;
    }
    const before = this.freeRanges[lo - 1];
    const after = this.freeRanges[lo];
    const joinsBefore = before !== undefined && before.offset + before.bytes === range.offset;
    const joinsAfter = after !== undefined && range.offset + range.bytes === after.offset;
    if (joinsBefore && joinsAfter) {
      before.bytes += range.bytes + after.bytes;
      this.freeRanges.splice(lo, 1);
    } else if (joinsBefore) {
      before.bytes += range.bytes;
    } else if (joinsAfter) {
      after.offset = range.offset;
      after.bytes += range.bytes;
    } else {
      this.freeRanges.splice(lo, 0, range);
    }
  }
}
