import type { PlainTensor } from '#libs/learner';

/** Where one tensor lies in a shared area, and what it is. */
export interface SharedSlot {
  name: string;
  dtype: PlainTensor['dtype'];
  shape: number[];
  /** The typed array its data came in. */
  array: 'float32' | 'int32' | 'uint8';
  /** Byte offset in the area. */
  offset: number;
  /** Elements. */
  length: number;
}

/** Tensors written into shared memory: the memory and where each lies. */
export interface SharedTensors {
  buffer: SharedArrayBuffer;
  slots: SharedSlot[];
}

/** Offsets are kept 8-byte aligned, so a view of any element type can start there. */
const ALIGN = 8;

/** The typed array's kind, by its tag (arrays that came from another thread may not be `instanceof` here). */
function arrayOf(data: PlainTensor['data']): SharedSlot['array'] {
  const tag = data[Symbol.toStringTag];
  if (tag === 'Float32Array') return 'float32';
  if (tag === 'Int32Array') return 'int32';
  if (tag === 'Uint8Array') return 'uint8';
  throw new TypeError(`tensor data must be a Float32Array, Int32Array or Uint8Array (got ${tag})`);
}

function viewOf(buffer: SharedArrayBuffer, slot: SharedSlot): PlainTensor['data'] {
  if (slot.array === 'float32') return new Float32Array(buffer, slot.offset, slot.length);
  if (slot.array === 'int32') return new Int32Array(buffer, slot.offset, slot.length);
  return new Uint8Array(buffer, slot.offset, slot.length);
}

/**
 * Shared memory that tensors are copied into to cross to another thread: one copy in, none in
 * the message (a `SharedArrayBuffer` is shared, not cloned). It grows to the largest set written.
 * The writer must not write again before the reader is done with the last set.
 */
export class SharedArea {
  private buffer = new SharedArrayBuffer(0);

  /** Copies `tensors` in and says where each lies. */
  write(tensors: readonly PlainTensor[]): SharedTensors {
    const slots: SharedSlot[] = [];
    let end = 0;
    for (const { name, dtype, shape, data } of tensors) {
      slots.push({ name, dtype, shape: [...shape], array: arrayOf(data), offset: end, length: data.length });
      end += Math.ceil(data.byteLength / ALIGN) * ALIGN;
    }
    if (this.buffer.byteLength < end) this.buffer = new SharedArrayBuffer(end);
    tensors.forEach(({ data }, i) => {
      const slot = slots[i]!;
      new Uint8Array(this.buffer, slot.offset, data.byteLength).set(
        new Uint8Array(data.buffer, data.byteOffset, data.byteLength),
      );
    });
    return { buffer: this.buffer, slots };
  }
}

/** The tensors of a shared area: views of its memory, or copies of their own with `copy`. */
export function readShared({ buffer, slots }: SharedTensors, { copy }: { copy: boolean }): PlainTensor[] {
  return slots.map((slot) => {
    const view = viewOf(buffer, slot);
    return { name: slot.name, dtype: slot.dtype, shape: slot.shape, data: copy ? view.slice() : view };
  });
}
