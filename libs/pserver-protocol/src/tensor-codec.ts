import { DataType, type Tensor } from '#proto/generated/pserver.js';
import { MalformedTensorError } from './errors.js';
import { decodeBfloat16, decodeFloat16, encodeBfloat16, encodeFloat16 } from './half-precision.js';
import { wireClock } from './wire-clock.js';

/** Most tensor bytes one message carries; larger tensors are split into parts. */
export const TENSOR_CHUNK_SIZE_BYTES = 1024 * 1024;
/** Largest tensor a receiver assembles (guards against absurd shapes in garbage messages). */
export const MAX_TENSOR_SIZE_BYTES = 1024 * 1024 * 1024;

/** Typed arrays that can travel as tensors, one per `DataType`. */
export type TensorArray = Int32Array | Uint32Array | BigInt64Array | BigUint64Array | Float32Array | Float64Array;

/** A named tensor in memory. Shapes are row-major; `data.length` is the product of `shape`. */
export interface NamedTensor<A extends TensorArray = Float32Array> {
  name: string;
  shape: readonly number[];
  data: A;
}

const ELEMENT_SIZE_BYTES: Record<DataType, number> = {
  [DataType.UNSPECIFIED]: 0,
  [DataType.INT32]: 4,
  [DataType.UINT32]: 4,
  [DataType.INT64]: 8,
  [DataType.UINT64]: 8,
  [DataType.FLOAT32]: 4,
  [DataType.FLOAT64]: 8,
  [DataType.FLOAT16]: 2,
  [DataType.BFLOAT16]: 2,
};

/**
 * The element types a float32 tensor may travel in, by the names job specs and clients use:
 * float32 as it is, or float16 and bfloat16 in half the bytes, decoded to float32 on arrival.
 */
export const FLOAT_WIRE_TYPES = {
  float32: DataType.FLOAT32,
  float16: DataType.FLOAT16,
  bfloat16: DataType.BFLOAT16,
} as const;

/** Name of an element type a float32 tensor may travel in. */
export type FloatWireType = keyof typeof FLOAT_WIRE_TYPES;

/** True when `dtype` is one a float32 tensor may travel in (see `FLOAT_WIRE_TYPES`). */
export function isFloatWireType(dtype: DataType): boolean {
  return dtype === DataType.FLOAT32 || dtype === DataType.FLOAT16 || dtype === DataType.BFLOAT16;
}

/** Lower-case names of the data types, for messages. */
export function dataTypeName(dtype: DataType): string {
  return (DataType[dtype] as string | undefined)?.toLowerCase() ?? `dtype ${dtype}`;
}

/** Bytes per element of `dtype`; 0 for an unknown or unspecified one. */
export function elementSizeBytes(dtype: DataType): number {
  return ELEMENT_SIZE_BYTES[dtype] ?? 0;
}

/** Number of elements of a tensor of `shape` (1 for a scalar). */
export function elementCount(shape: readonly number[]): number {
  return shape.reduce((n, d) => n * d, 1);
}

/** The `DataType` of a typed array. */
export function dataTypeOf(data: TensorArray): DataType {
  if (data instanceof Float32Array) return DataType.FLOAT32;
  if (data instanceof Float64Array) return DataType.FLOAT64;
  if (data instanceof Int32Array) return DataType.INT32;
  if (data instanceof Uint32Array) return DataType.UINT32;
  if (data instanceof BigInt64Array) return DataType.INT64;
  return DataType.UINT64;
}

/** A typed array of `dtype` viewing `bytes`, which must be aligned for it. */
export function typedArrayOf(dtype: DataType, bytes: Uint8Array): TensorArray {
  const { buffer, byteOffset, byteLength } = bytes;
  const n = byteLength / elementSizeBytes(dtype);
  switch (dtype) {
    case DataType.FLOAT32:
      return new Float32Array(buffer, byteOffset, n);
    case DataType.FLOAT64:
      return new Float64Array(buffer, byteOffset, n);
    case DataType.INT32:
      return new Int32Array(buffer, byteOffset, n);
    case DataType.UINT32:
      return new Uint32Array(buffer, byteOffset, n);
    case DataType.INT64:
      return new BigInt64Array(buffer, byteOffset, n);
    case DataType.UINT64:
      return new BigUint64Array(buffer, byteOffset, n);
    default:
      throw new MalformedTensorError('', `no typed array views ${dataTypeName(dtype)}`);
  }
}

/**
 * Splits a tensor into messages of at most `maxChunkBytes` data bytes each (one message for a
 * small or empty tensor). Every part repeats name, dtype and shape. The tensor travels as
 * `dtype`, by default its own: then the bytes are the typed array's own memory, little-endian on
 * every platform Node.js runs on; a float32 tensor sent as float16 or bfloat16 is encoded once
 * into a buffer of its own.
 */
export function* tensorParts(
  tensor: NamedTensor<TensorArray>,
  maxChunkBytes = TENSOR_CHUNK_SIZE_BYTES,
  dtype: DataType = dataTypeOf(tensor.data),
): Generator<Tensor> {
  const { name, shape, data } = tensor;
  if (elementCount(shape) !== data.length) {
    throw new MalformedTensorError(name, `shape [${shape.join(', ')}] does not match ${data.length} elements`);
  }
  const bytes = wireClock.encoding(() => wireBytes(tensor, dtype));
  const step = Math.max(elementSizeBytes(dtype), maxChunkBytes - (maxChunkBytes % elementSizeBytes(dtype)));
  let offset = 0;
  do {
    const end = Math.min(bytes.length, offset + step);
    yield { name, dtype, shape: [...shape], data: bytes.subarray(offset, end), offset };
    offset = end;
  } while (offset < bytes.length);
}

/** The bytes `tensor` travels as in `dtype`: its own memory, or its float32 values encoded. */
function wireBytes({ name, data }: NamedTensor<TensorArray>, dtype: DataType): Buffer {
  const own = dataTypeOf(data);
  if (dtype === own) return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  if (own !== DataType.FLOAT32 || (dtype !== DataType.FLOAT16 && dtype !== DataType.BFLOAT16)) {
    throw new MalformedTensorError(name, `cannot travel as ${dataTypeName(dtype)}: it holds ${dataTypeName(own)}`);
  }
  const half = new Uint16Array(data.length);
  if (dtype === DataType.FLOAT16) encodeFloat16(data as Float32Array, half);
  else encodeBfloat16(data as Float32Array, half);
  return Buffer.from(half.buffer, half.byteOffset, half.byteLength);
}

/**
 * A tensor put back together from its parts; `bytes` is aligned for its dtype and shared with
 * nothing else (a buffer of its own, or the one message that carried the whole tensor).
 */
export interface AssembledTensor {
  name: string;
  dtype: DataType;
  shape: number[];
  bytes: Uint8Array;
}

/**
 * Checks the first part of each tensor before anything is allocated for it; throws to refuse
 * the tensor (an unknown name, a wrong dtype or shape).
 */
export type TensorExpectation = (name: string, dtype: DataType, shape: readonly number[]) => void;

interface Pending {
  tensor: AssembledTensor;
  received: number;
}

/**
 * Puts tensors back together from parts received in order. Each part must continue its tensor
 * exactly where the previous one stopped and agree with it on dtype and shape; a tensor whose
 * last part arrived is complete, and a name may not come back after that.
 */
export class TensorAssembler {
  private readonly pending = new Map<string, Pending>();
  private readonly complete = new Map<string, AssembledTensor>();

  constructor(
    private readonly expect: TensorExpectation = () => undefined,
    private readonly maxTensorBytes = MAX_TENSOR_SIZE_BYTES,
  ) {}

  /** Adds one part; returns the tensor when this part completed it. Timed as decoding. */
  add(part: Tensor): AssembledTensor | undefined {
    return wireClock.decoding(() => this.addPart(part));
  }

  private addPart(part: Tensor): AssembledTensor | undefined {
    const { name, dtype, shape, data, offset } = part;
    if (name === '') throw new MalformedTensorError(name, 'has no name');
    if (this.complete.has(name)) throw new MalformedTensorError(name, 'was sent twice');
    let entry = this.pending.get(name);
    if (!entry) {
      entry = this.start(name, dtype, shape, offset === 0 ? data : undefined);
      if (entry.received === entry.tensor.bytes.length) {
        this.complete.set(name, entry.tensor);
        return entry.tensor;
      }
      this.pending.set(name, entry);
    } else if (entry.tensor.dtype !== dtype || !sameShape(entry.tensor.shape, shape)) {
      throw new MalformedTensorError(
        name,
        `part at byte ${offset} says ${dataTypeName(dtype)} [${shape.join(', ')}], earlier parts said ` +
          `${dataTypeName(entry.tensor.dtype)} [${entry.tensor.shape.join(', ')}]`,
      );
    }
    const total = entry.tensor.bytes.length;
    if (offset !== entry.received) {
      throw new MalformedTensorError(name, `part at byte ${offset}, expected the part at byte ${entry.received}`);
    }
    if (offset + data.length > total) {
      throw new MalformedTensorError(
        name,
        `part of ${data.length} bytes at byte ${offset} overruns its ${total} bytes`,
      );
    }
    if (data.length === 0 && total > 0) throw new MalformedTensorError(name, `empty part at byte ${offset}`);
    entry.tensor.bytes.set(data, offset);
    entry.received += data.length;
    if (entry.received < total) return undefined;
    this.pending.delete(name);
    this.complete.set(name, entry.tensor);
    return entry.tensor;
  }

  /** Every complete tensor, in the order they completed; throws if a tensor is still partial. */
  finish(): AssembledTensor[] {
    for (const [name, entry] of this.pending) {
      throw new MalformedTensorError(name, `ended after ${entry.received} of ${entry.tensor.bytes.length} bytes`);
    }
    return [...this.complete.values()];
  }

  /**
   * Checks a tensor's first part and makes room for it. A part that holds the whole tensor,
   * aligned for its dtype, becomes the tensor's bytes as it is (the message buffer it views
   * belongs to that message alone), so the common one-part tensor is not copied.
   */
  private start(name: string, dtype: DataType, shape: readonly number[], whole?: Uint8Array): Pending {
    const size = elementSizeBytes(dtype);
    if (size === 0) throw new MalformedTensorError(name, `unknown dtype ${dtype}`);
    for (const d of shape) {
      if (!Number.isSafeInteger(d) || d < 0)
        throw new MalformedTensorError(name, `invalid dimension ${d} in its shape`);
    }
    const bytes = elementCount(shape) * size;
    if (bytes > this.maxTensorBytes) {
      throw new MalformedTensorError(name, `${bytes} bytes exceed the limit of ${this.maxTensorBytes}`);
    }
    this.expect(name, dtype, shape);
    if (whole !== undefined && whole.length === bytes && bytes > 0 && whole.byteOffset % size === 0) {
      return { tensor: { name, dtype, shape: [...shape], bytes: whole }, received: bytes };
    }
    // Every byte is written by a part before the tensor is complete, and an incomplete one is
    // never handed out, so the buffer need not be zeroed first.
    return { tensor: { name, dtype, shape: [...shape], bytes: Buffer.allocUnsafeSlow(bytes) }, received: 0 };
  }
}

/** True when two shapes have the same dimensions. */
export function sameShape(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((d, i) => d === b[i]);
}

/**
 * The assembled tensor as a `NamedTensor` of its dtype's typed array (no copy), or of float32
 * values decoded from float16 or bfloat16.
 */
export function toNamedTensor(t: AssembledTensor): NamedTensor<TensorArray> {
  const half = t.dtype === DataType.FLOAT16 || t.dtype === DataType.BFLOAT16;
  return { name: t.name, shape: t.shape, data: half ? float32Values(t) : typedArrayOf(t.dtype, t.bytes) };
}

/**
 * The values of an assembled float tensor as float32: a view of float32 bytes (no copy), or
 * decoded from float16 or bfloat16 into an array of their own (timed as decoding). Any other
 * dtype is malformed here.
 */
export function float32Values(t: AssembledTensor): Float32Array {
  const { name, dtype, bytes } = t;
  if (dtype === DataType.FLOAT32) return typedArrayOf(dtype, bytes) as Float32Array;
  if (dtype !== DataType.FLOAT16 && dtype !== DataType.BFLOAT16) {
    throw new MalformedTensorError(name, `expected float32, float16 or bfloat16, got ${dataTypeName(dtype)}`);
  }
  // The assembler keeps a tensor's bytes aligned for its dtype.
  const half = new Uint16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 2);
  return wireClock.decoding(() => {
    const values = new Float32Array(half.length);
    if (dtype === DataType.FLOAT16) decodeFloat16(half, values);
    else decodeBfloat16(half, values);
    return values;
  });
}
