import { createReadStream } from 'node:fs';
import { open } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import { IdxFormatError } from './errors.js';

/** Element type of an IDX file, named after the type byte of its magic number. */
export type IdxDataType = 'ubyte' | 'byte' | 'short' | 'int' | 'float' | 'double';

/** Typed array holding the elements of an IDX file in host byte order. */
export type IdxData = Uint8Array | Int8Array | Int16Array | Int32Array | Float32Array | Float64Array;

/** A parsed IDX file: its element type, its dimensions and all its elements in row-major order. */
export interface IdxArray {
  readonly file: string;
  readonly dataType: IdxDataType;
  /** Dimensions; `dims[0]` is the number of items. */
  readonly dims: readonly number[];
  readonly data: IdxData;
}

interface IdxTypeInfo {
  readonly name: IdxDataType;
  readonly bytes: 1 | 2 | 4 | 8;
}

const IDX_TYPES = new Map<number, IdxTypeInfo>([
  [0x08, { name: 'ubyte', bytes: 1 }],
  [0x09, { name: 'byte', bytes: 1 }],
  [0x0b, { name: 'short', bytes: 2 }],
  [0x0c, { name: 'int', bytes: 4 }],
  [0x0d, { name: 'float', bytes: 4 }],
  [0x0e, { name: 'double', bytes: 8 }],
]);

/** Type byte written in the magic number for each IDX element type. */
export const IDX_TYPE_CODES: Readonly<Record<IdxDataType, number>> = {
  ubyte: 0x08,
  byte: 0x09,
  short: 0x0b,
  int: 0x0c,
  float: 0x0d,
  double: 0x0e,
};

const GZIP_MAGIC_0 = 0x1f;
const GZIP_MAGIC_1 = 0x8b;
const MAGIC_BYTES = 4;
const DIM_BYTES = 4;
const LITTLE_ENDIAN_HOST = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** True when the file starts with the gzip magic number `1f 8b`. */
async function isGzipped(file: string): Promise<boolean> {
  const handle = await open(file, 'r');
  try {
    const head = Buffer.alloc(2);
    const { bytesRead } = await handle.read(head, 0, 2, 0);
    return bytesRead === 2 && head[0] === GZIP_MAGIC_0 && head[1] === GZIP_MAGIC_1;
  } finally {
    await handle.close();
  }
}

/**
 * Incremental IDX decoder: takes the decompressed bytes in pieces, reads the header as soon as
 * it is complete, then copies the elements straight into one buffer of the announced size.
 */
export class IdxDecoder {
  private header: Buffer = Buffer.alloc(0);
  private type: IdxTypeInfo | undefined;
  private dims: number[] | undefined;
  private body: Uint8Array | undefined;
  private filled = 0;

  constructor(private readonly file: string) {}

  push(piece: Buffer): void {
    let rest = piece;
    if (this.body === undefined) {
      rest = this.takeHeader(rest);
      if (this.body === undefined) return;
    }
    if (rest.length === 0) return;
    const room = this.body.length - this.filled;
    if (rest.length > room) {
      throw new IdxFormatError(
        this.file,
        `trailing data: the header announces ${this.body.length} data bytes but there are more`,
      );
    }
    this.body.set(rest, this.filled);
    this.filled += rest.length;
  }

  finish(): IdxArray {
    if (this.body === undefined || this.type === undefined || this.dims === undefined) {
      throw new IdxFormatError(this.file, `truncated header: got ${this.header.length} bytes`);
    }
    if (this.filled !== this.body.length) {
      throw new IdxFormatError(
        this.file,
        `truncated data: expected ${this.body.length} bytes for dims [${this.dims.join(', ')}] got ${this.filled}`,
      );
    }
    return { file: this.file, dataType: this.type.name, dims: this.dims, data: toTypedArray(this.type, this.body) };
  }

  /** Consumes header bytes from `piece`; returns what is left once the header is complete. */
  private takeHeader(piece: Buffer): Buffer {
    this.header = this.header.length === 0 ? piece : Buffer.concat([this.header, piece]);
    if (this.header.length < MAGIC_BYTES) return Buffer.alloc(0);
    const h = this.header;
    if (h[0] !== 0 || h[1] !== 0) {
      throw new IdxFormatError(
        this.file,
        `bad magic number ${h.subarray(0, MAGIC_BYTES).toString('hex')} (expected 0000 then type and rank)`,
      );
    }
    const type = IDX_TYPES.get(h[2]!);
    if (type === undefined) {
      throw new IdxFormatError(this.file, `unknown data type 0x${h[2]!.toString(16).padStart(2, '0')}`);
    }
    const rank = h[3]!;
    if (rank === 0) throw new IdxFormatError(this.file, 'rank 0: an IDX file needs at least one dimension');
    const headerBytes = MAGIC_BYTES + DIM_BYTES * rank;
    if (h.length < headerBytes) return Buffer.alloc(0);
    const dims: number[] = [];
    let elements = 1;
    for (let i = 0; i < rank; i++) {
      const d = h.readUInt32BE(MAGIC_BYTES + DIM_BYTES * i);
      dims.push(d);
      elements *= d;
    }
    const dataBytes = elements * type.bytes;
    if (!Number.isSafeInteger(dataBytes) || dataBytes > 2 ** 32) {
      throw new IdxFormatError(this.file, `dims [${dims.join(', ')}] describe ${dataBytes} bytes, too many to load`);
    }
    this.type = type;
    this.dims = dims;
    // A fresh ArrayBuffer (offset 0) so that typed views of any element size line up.
    this.body = new Uint8Array(dataBytes);
    const rest = h.subarray(headerBytes);
    this.header = Buffer.alloc(0);
    return rest;
  }
}

/** Reinterprets big-endian IDX elements as a typed array in host order, swapping bytes in place. */
function toTypedArray(type: IdxTypeInfo, body: Uint8Array): IdxData {
  const buf = body.buffer;
  if (LITTLE_ENDIAN_HOST) {
    const asBuffer = Buffer.from(buf, body.byteOffset, body.byteLength);
    if (type.bytes === 2) asBuffer.swap16();
    else if (type.bytes === 4) asBuffer.swap32();
    else if (type.bytes === 8) asBuffer.swap64();
  }
  switch (type.name) {
    case 'ubyte':
      return body;
    case 'byte':
      return new Int8Array(buf, body.byteOffset, body.length);
    case 'short':
      return new Int16Array(buf, body.byteOffset, body.length / 2);
    case 'int':
      return new Int32Array(buf, body.byteOffset, body.length / 4);
    case 'float':
      return new Float32Array(buf, body.byteOffset, body.length / 4);
    case 'double':
      return new Float64Array(buf, body.byteOffset, body.length / 8);
  }
}

/**
 * Reads an IDX file (gzipped or not; gzip is recognised by its magic number). The file is
 * streamed and decompressed once, straight into a buffer of the size the header announces.
 * @throws IdxFormatError naming the file on a bad magic number, an unknown type, a truncated
 *   file, trailing bytes or corrupt gzip data.
 */
export async function readIdx(file: string): Promise<IdxArray> {
  const gzipped = await isGzipped(file);
  const raw = createReadStream(file);
  let source: Readable = raw;
  if (gzipped) {
    const gunzip = createGunzip();
    raw.on('error', (err) => gunzip.destroy(err));
    source = raw.pipe(gunzip);
  }
  const decoder = new IdxDecoder(file);
  try {
    for await (const piece of source) decoder.push(piece as Buffer);
  } catch (err) {
    raw.destroy();
    if (err instanceof IdxFormatError) throw err;
    const code = (err as NodeJS.ErrnoException).code;
    if (gzipped && typeof code === 'string' && code.startsWith('Z_')) {
      throw new IdxFormatError(file, `corrupt gzip data: ${(err as Error).message}`, { cause: err });
    }
    throw err;
  }
  return decoder.finish();
}

/**
 * Encodes elements as an uncompressed IDX file (magic `00 00 <type> <rank>`, big-endian dims,
 * big-endian elements); gzip the result for a `.gz` file.
 * @throws RangeError when the dims do not describe `data.length` elements.
 */
export function encodeIdx(dataType: IdxDataType, dims: readonly number[], data: ArrayLike<number>): Uint8Array {
  const elements = dims.reduce((n, d) => n * d, 1);
  if (elements !== data.length) {
    throw new RangeError(`IDX dims [${dims.join(', ')}] describe ${elements} elements, got ${data.length}`);
  }
  const type = IDX_TYPES.get(IDX_TYPE_CODES[dataType])!;
  const headerBytes = MAGIC_BYTES + DIM_BYTES * dims.length;
  const out = new Uint8Array(headerBytes + elements * type.bytes);
  const view = new DataView(out.buffer);
  out[2] = IDX_TYPE_CODES[dataType];
  out[3] = dims.length;
  dims.forEach((d, i) => view.setUint32(MAGIC_BYTES + DIM_BYTES * i, d, false));
  const write: (at: number, value: number) => void = {
    ubyte: (at: number, v: number) => view.setUint8(at, v),
    byte: (at: number, v: number) => view.setInt8(at, v),
    short: (at: number, v: number) => view.setInt16(at, v, false),
    int: (at: number, v: number) => view.setInt32(at, v, false),
    float: (at: number, v: number) => view.setFloat32(at, v, false),
    double: (at: number, v: number) => view.setFloat64(at, v, false),
  }[dataType];
  for (let i = 0; i < elements; i++) write(headerBytes + i * type.bytes, data[i]!);
  return out;
}
