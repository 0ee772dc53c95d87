/**
 * Snappy block decoding and CRC-32C in hand-written WebAssembly (`snappy.wat`), the fast path of
 * reading snappy-framed chunks. The module has its own memory: blocks are copied in, decoded and
 * checksummed there, and copied out once. Where it cannot load (no WebAssembly SIMD128, not
 * assembled, or `TRIBUTARY_KERNELS=js`), callers keep the plain JavaScript path.
 */
import { KERNELS_ENV_VAR, WASM_PAGE_BYTES, compileKernelModule, plainKernelsForced } from '#libs/wasm-simd';

/**
 * The negative codes that {@link WasmSnappy.uncompressInto} and {@link WasmSnappy.decodeFrameBody}
 * return instead of a result: those of `snappy.wat`'s `uncompress`, and the loader's own when
 * the module's memory cannot grow to hold a block.
 */
export const SnappyBlockErrorCode = {
  /** The length preamble is cut short or longer than 5 bytes. */
  BadPreamble: -1,
  /** The preamble's length differs from the output's. */
  LengthMismatch: -2,
  /** A literal runs past the end of the input. */
  LiteralOverrunsInput: -3,
  /** A literal runs past the end of the output. */
  LiteralOverrunsOutput: -4,
  /** A copy's offset is 0 or reaches before the start of the output. */
  BadOffset: -5,
  /** A copy runs past the end of the output. */
  CopyOverrunsOutput: -6,
  /** The input ends inside a tag (its length or offset bytes). */
  TruncatedTag: -7,
  /** The input ends before the output is full. */
  OutputShort: -8,
  /** The module's memory cannot grow enough to hold the block. */
  NoMemory: -9,
} as const;

/** The exports of one instance of `snappy.wat`; addresses and lengths are byte offsets in `memory`. */
export interface SnappyModule {
  /** The module's own memory; bytes below `workspaceStart()` hold its CRC-32C tables. */
  readonly memory: WebAssembly.Memory;
  /** The first byte of `memory` that callers may use. */
  workspaceStart(): number;
  /** Decodes a snappy block: the bytes written (`dstLen`), or a negative {@link SnappyBlockErrorCode}. */
  uncompress(src: number, srcLen: number, dst: number, dstLen: number): number;
  /**
   * CRC-32C of `[ptr, ptr + len)` continuing `seed`, the CRC-32C of the bytes before (0 for
   * none), as a signed 32-bit integer.
   */
  crc32c(ptr: number, len: number, seed: number): number;
}

const SNAPPY_WASM_URL = new URL('./snappy.wasm', import.meta.url);
/** How much of a checksummed array goes through the module's memory at a time. */
const CRC_PIECE_BYTES = 65536;

let compiled: WebAssembly.Module | undefined;

/**
 * A fresh instance of `snappy.wat`, compiled once per process; each instance has its own memory.
 *
 * @throws WasmKernelUnavailableError naming the file: no SIMD128, not assembled, or not valid.
 */
export function instantiateSnappyModule(): SnappyModule {
  compiled ??= compileKernelModule(SNAPPY_WASM_URL);
  return new WebAssembly.Instance(compiled).exports as unknown as SnappyModule;
}

/**
 * Snappy decoding and CRC-32C over one instance of `snappy.wat`. Its memory holds, from the
 * workspace start, the output area then the input area, grown when a block needs more; nothing
 * is allocated per call but the view that copies a decoded block out.
 */
export class WasmSnappy {
  private bytes: Uint8Array;
  private readonly workspace: number;

  constructor(private readonly module: SnappyModule) {
    this.bytes = new Uint8Array(module.memory.buffer);
    this.workspace = module.workspaceStart();
  }

  /**
   * Decodes the snappy block `block` into `out`, whose length must be the block's uncompressed
   * length: `out.length`, or a negative {@link SnappyBlockErrorCode} (`out` then holds garbage).
   */
  uncompressInto(block: Uint8Array, out: Uint8Array): number {
    const written = this.uncompressInMemory(block, out.length);
    if (written >= 0) out.set(this.bytes.subarray(this.workspace, this.workspace + out.length));
    return written;
  }

  /** CRC-32C (Castagnoli) of `data`, as an unsigned 32-bit integer. */
  crc32c(data: Uint8Array): number {
    // In pieces, which the module's initial two pages hold past the workspace start: checksumming
    // never has to grow the memory.
    let crc = 0;
    for (let start = 0; start < data.length; start += CRC_PIECE_BYTES) {
      const piece = data.length <= CRC_PIECE_BYTES ? data : data.subarray(start, start + CRC_PIECE_BYTES);
      this.bytes.set(piece, this.workspace);
      crc = this.module.crc32c(this.workspace, piece.length, crc);
    }
    return crc >>> 0;
  }

  /**
   * Decodes one frame's body into `out` (decompressing it when `compressed`, else copying it,
   * `out` being as long as the body) and returns the CRC-32C of the decoded bytes, computed
   * before they leave the module's memory; or a negative {@link SnappyBlockErrorCode}.
   */
  decodeFrameBody(body: Uint8Array, compressed: boolean, out: Uint8Array): number {
    if (compressed) {
      const written = this.uncompressInMemory(body, out.length);
      if (written < 0) return written;
    } else {
      if (!this.reserve(this.workspace + body.length)) return SnappyBlockErrorCode.NoMemory;
      this.bytes.set(body, this.workspace);
    }
    const checksum = this.module.crc32c(this.workspace, out.length, 0) >>> 0;
    out.set(this.bytes.subarray(this.workspace, this.workspace + out.length));
    return checksum;
  }

  /** Decodes `block` into the output area, `outLength` bytes long; what `uncompress` returns. */
  private uncompressInMemory(block: Uint8Array, outLength: number): number {
    const input = this.workspace + outLength;
    if (!this.reserve(input + block.length)) return SnappyBlockErrorCode.NoMemory;
    this.bytes.set(block, input);
    return this.module.uncompress(input, block.length, this.workspace, outLength);
  }

  /** Grows the memory to at least `end` bytes; false when it cannot. */
  private reserve(end: number): boolean {
    if (end <= this.bytes.length) return true;
    try {
      this.module.memory.grow(Math.ceil((end - this.bytes.length) / WASM_PAGE_BYTES));
    } catch {
      return false;
    }
    // Growing detaches the old buffer, and only this class grows the memory.
    this.bytes = new Uint8Array(this.module.memory.buffer);
    return true;
  }
}

let loaded: { snappy: WasmSnappy } | { reason: string } | undefined;

function load(): { snappy: WasmSnappy } | { reason: string } {
  if (plainKernelsForced()) return { reason: `${KERNELS_ENV_VAR}=js asks for plain JavaScript` };
  try {
    return { snappy: new WasmSnappy(instantiateSnappyModule()) };
  } catch (err) {
    return { reason: (err as Error).message };
  }
}

/**
 * The process's WebAssembly snappy decoder and CRC-32C, loaded on first use; undefined when it
 * cannot load, and then {@link wasmSnappyUnavailableReason} says why.
 */
export function wasmSnappy(): WasmSnappy | undefined {
  loaded ??= load();
  return 'snappy' in loaded ? loaded.snappy : undefined;
}

/** Why {@link wasmSnappy} is undefined; undefined when it loads. */
export function wasmSnappyUnavailableReason(): string | undefined {
  loaded ??= load();
  return 'reason' in loaded ? loaded.reason : undefined;
}
