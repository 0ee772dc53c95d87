import { KernelArgumentError } from './errors.js';
import type { HeapArray, KernelHeap } from './kernel-heap.js';

/**
 * Elements staged per call of a kernel when some of its arrays lie outside the heap: 64 KiB of
 * float32, so the five arrays of an Adam step fit a core's L2 cache together.
 */
export const STAGING_CHUNK_ELEMENTS = 16_384;
/** Arrays outside the heap that one kernel call can stage. */
export const STAGING_SLOTS = 6;

/** How a kernel uses one of its arrays: reads it, writes it, or both. */
export type KernelArrayRole = 'in' | 'out' | 'inout';

/** One array argument of a kernel. */
export interface KernelArgument {
  array: HeapArray;
  role: KernelArrayRole;
}

/**
 * A kernel export: the byte offset of each array argument, the element count, then its scalars.
 * Kernels work element by element, so an output may be the same array as an input. A kernel
 * that writes arrays returns nothing; a check (see `KernelCaller.test`) returns 1 or 0.
 */
export type KernelEntry = (...args: number[]) => number | undefined;

interface StagedArray {
  array: HeapArray;
  slot: HeapArray;
  copyIn: boolean;
  copyOut: boolean;
}

/**
 * Calls kernel exports on arrays wherever they live. Arrays in the heap are passed as they are;
 * an array outside it (a gradient just received, a caller's own array) is staged through a small
 * scratch area in the heap, a chunk at a time: copied in before the kernel runs on the chunk if
 * the kernel reads it, copied back after if it writes it. A chunk stays in the processor's
 * cache between the copy and the kernel, so staging costs little memory bandwidth.
 */
export class KernelCaller {
  private readonly slots: { f32: Float32Array; f64: Float64Array }[];

  constructor(
    private readonly heap: KernelHeap,
    private readonly chunkElements = STAGING_CHUNK_ELEMENTS,
    slotCount = STAGING_SLOTS,
  ) {
    this.slots = Array.from({ length: slotCount }, () => {
      const f64 = heap.allocateFloat64(chunkElements);
      return { f64, f32: new Float32Array(f64.buffer, f64.byteOffset, chunkElements) };
    });
  }

  /**
   * Runs `entry` over `length` elements of `args` (each exactly that long), then `scalars`.
   * Arrays must not overlap unless they are the same array.
   *
   * @throws KernelArgumentError naming `name` when an array's length differs from `length`, or
   *   more arrays lie outside the heap than there are staging slots.
   */
  call(
    name: string,
    entry: KernelEntry,
    args: readonly KernelArgument[],
    length: number,
    scalars: readonly number[] = [],
  ): void {
    args.forEach(({ array }, k) => {
      if (array.length !== length) {
        throw new KernelArgumentError(name, `array argument ${k} has ${array.length} elements, expected ${length}`);
      }
    });
    if (length === 0) return;
    if (args.every(({ array }) => this.heap.holds(array))) {
      entry(...args.map(({ array }) => array.byteOffset), length, ...scalars);
      return;
    }
    const staged: StagedArray[] = [];
    const stagedIndex = args.map(({ array, role }) => {
      if (this.heap.holds(array)) return -1;
      let k = staged.findIndex((s) => s.array === array);
      if (k < 0) {
        if (staged.length === this.slots.length) {
          throw new KernelArgumentError(name, `more than ${this.slots.length} arrays outside the kernel heap`);
        }
        const slot = this.slots[staged.length];
        staged.push({
          array,
          slot: array instanceof Float64Array ? slot.f64 : slot.f32,
          copyIn: false,
          copyOut: false,
        });
        k = staged.length - 1;
      }
      staged[k].copyIn ||= role !== 'out';
      staged[k].copyOut ||= role !== 'in';
      return k;
    });
    // One argument list for every chunk: the offsets of the arrays, the chunk's length, the scalars.
    const callArgs = [...args.map(({ array }) => array.byteOffset), 0, ...scalars];
    for (let k = 0; k < args.length; k++) if (stagedIndex[k] >= 0) callArgs[k] = staged[stagedIndex[k]].slot.byteOffset;
    for (let start = 0; start < length; start += this.chunkElements) {
      const n = Math.min(this.chunkElements, length - start);
      for (const s of staged) if (s.copyIn) s.slot.set(s.array.subarray(start, start + n));
      for (let k = 0; k < args.length; k++) {
        const { array } = args[k];
        if (stagedIndex[k] < 0) callArgs[k] = array.byteOffset + start * array.BYTES_PER_ELEMENT;
      }
      callArgs[args.length] = n;
      Reflect.apply(entry, undefined, callArgs);
      for (const s of staged) if (s.copyOut) s.array.set(s.slot.subarray(0, n), start);
    }
  }

  /**
   * Runs a check export (the byte offset of `array`, its element count; returns 1 or 0) over
   * `array`, staged a chunk at a time when it lies outside the heap, and stops at the first
   * chunk that fails. True when every chunk passed (always for an empty array).
   */
  test(entry: KernelEntry, array: Float32Array): boolean {
    if (array.length === 0) return true;
    if (this.heap.holds(array)) return entry(array.byteOffset, array.length) === 1;
    const slot = this.slots[0]!.f32;
    for (let start = 0; start < array.length; start += this.chunkElements) {
      const n = Math.min(this.chunkElements, array.length - start);
      slot.set(array.subarray(start, start + n));
      if (entry(slot.byteOffset, n) !== 1) return false;
    }
    return true;
  }
}
