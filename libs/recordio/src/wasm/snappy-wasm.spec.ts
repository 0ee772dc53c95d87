import CRC32C from 'crc-32/crc32c.js';
import fc from 'fast-check';
import snappy from 'snappyjs';
import { SnappyFramingError, decodeSnappyFrames, encodeSnappyFrames } from '../snappy-framing.js';
import { KERNELS_ENV_VAR, plainKernelsForced } from '#libs/wasm-simd';
import {
  SnappyBlockErrorCode,
  WasmSnappy,
  instantiateSnappyModule,
  wasmSnappy,
  wasmSnappyUnavailableReason,
  type SnappyModule,
} from './snappy-wasm.js';

/** The plain JavaScript CRC-32C the WebAssembly one must equal. */
const referenceCrc32c = (data: Uint8Array): number => CRC32C.buf(data, 0) >>> 0;

const ERROR_CODES: readonly number[] = Object.values(SnappyBlockErrorCode);

/** `length` bytes from a xorshift generator: random data without drawing each byte through fast-check. */
function noise(length: number, seed: number): Uint8Array {
  const out = new Uint8Array(length);
  for (let i = 0, x = seed | 1; i < length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x >>> 24;
  }
  return out;
}

const noiseOf = (maxLength: number) =>
  fc.tuple(fc.integer({ min: 0, max: maxLength }), fc.integer()).map(([length, seed]) => noise(length, seed));

/**
 * Data shaped like what snappy meets: random bytes, runs of one byte, a short pattern repeated,
 * and echoes of earlier data from near and far (so copies with 1- and 2-byte offsets, short and
 * long, overlapping their source or not). Arrays are drawn at full size (`size: 'max'`), as
 * fast-check otherwise keeps them to about 10 elements.
 */
const segment = fc.oneof(
  noiseOf(300).map((bytes) => ({ kind: 'random' as const, bytes })),
  fc.record({ kind: fc.constant('run' as const), byte: fc.nat(255), length: fc.integer({ min: 1, max: 5000 }) }),
  fc.record({
    kind: fc.constant('pattern' as const),
    pattern: fc.uint8Array({ minLength: 1, maxLength: 20, size: 'max' }),
    length: fc.integer({ min: 1, max: 5000 }),
  }),
  fc.record({ kind: fc.constant('echo' as const), back: fc.integer({ min: 1, max: 70000 }), length: fc.nat(300) }),
);

/** Up to 70,000 bytes: segments, or noise that snappy cannot compress. */
const data = fc.oneof(
  fc.array(segment, { maxLength: 40, size: 'max' }).map((segments) => {
    const out: number[] = [];
    for (const s of segments) {
      if (s.kind === 'random') out.push(...s.bytes);
      else if (s.kind === 'run') for (let i = 0; i < s.length; i++) out.push(s.byte);
      else if (s.kind === 'pattern') for (let i = 0; i < s.length; i++) out.push(s.pattern[i % s.pattern.length]!);
      else if (out.length > 0) {
        const from = Math.max(0, out.length - s.back);
        for (let i = 0; i < s.length; i++) out.push(out[from + i]!);
      }
      if (out.length >= 70000) break;
    }
    return Uint8Array.from(out.slice(0, 70000));
  }),
  noiseOf(70000),
);

/** A varint, as in a snappy block's preamble. */
function varint(value: number): number[] {
  const bytes: number[] = [];
  for (; value >= 0x80; value = Math.floor(value / 128)) bytes.push((value & 0x7f) | 0x80);
  bytes.push(value);
  return bytes;
}

/**
 * A snappy element in any encoding the format allows, even those snappyjs never writes: a
 * literal with its length in 0..4 extra bytes, a copy with a 1-, 2- or 4-byte offset.
 */
type Element =
  | { kind: 'literal'; bytes: Uint8Array; extraBytes: number }
  | { kind: 'copy'; back: number; length: number; offsetBytes: 1 | 2 | 4 };

const element = fc.oneof(
  fc.record({
    kind: fc.constant('literal' as const),
    bytes: fc.uint8Array({ minLength: 1, maxLength: 400, size: 'max' }),
    extraBytes: fc.integer({ min: 0, max: 4 }),
  }),
  fc.record({
    kind: fc.constant('copy' as const),
    back: fc.integer({ min: 1, max: 2100 }),
    length: fc.integer({ min: 1, max: 64 }),
    offsetBytes: fc.constantFrom(1 as const, 2 as const, 4 as const),
  }),
);

/** Encodes elements into a block, dropping those it cannot encode, and the bytes it stands for. */
function encodeElements(elements: Element[]): { block: Uint8Array; expected: Uint8Array } {
  const out: number[] = [];
  const body: number[] = [];
  for (const e of elements) {
    if (e.kind === 'literal') {
      const n = e.bytes.length - 1;
      const extra = Math.max(e.extraBytes, n < 60 ? 0 : n < 256 ? 1 : 2);
      if (extra === 0) body.push(n << 2);
      else body.push((59 + extra) << 2, ...[0, 1, 2, 3].slice(0, extra).map((i) => (n >>> (8 * i)) & 0xff));
      body.push(...e.bytes);
      out.push(...e.bytes);
      continue;
    }
    const offset = Math.min(e.back, out.length);
    if (offset === 0) continue;
    if (e.offsetBytes === 1 && offset < 2048 && e.length >= 4 && e.length <= 11) {
      body.push(1 | ((e.length - 4) << 2) | ((offset >> 8) << 5), offset & 0xff);
    } else if (e.offsetBytes === 4) {
      body.push(3 | ((e.length - 1) << 2), offset & 0xff, (offset >> 8) & 0xff, 0, 0);
    } else {
      body.push(2 | ((e.length - 1) << 2), offset & 0xff, offset >> 8);
    }
    for (let i = 0; i < e.length; i++) out.push(out[out.length - offset]!);
  }
  return { block: Uint8Array.from([...varint(out.length), ...body]), expected: Uint8Array.from(out) };
}

const GUARD_BYTES = 64;
const GUARD_VALUE = 0xa5;

/**
 * Decodes `block` into `dstLen` bytes of a fresh module's memory laid out as guard | output |
 * guard | input, the input ending where the memory ends so that reading past it traps, and
 * reports what `uncompress` returned and whether it wrote outside the output.
 */
function uncompressGuarded(module: SnappyModule, block: Uint8Array, dstLen: number) {
  const needed = module.workspaceStart() + 2 * GUARD_BYTES + dstLen + block.length - module.memory.buffer.byteLength;
  if (needed > 0) module.memory.grow(Math.ceil(needed / 65536));
  const memory = new Uint8Array(module.memory.buffer);
  const src = memory.length - block.length;
  const dst = src - GUARD_BYTES - dstLen;
  memory.fill(GUARD_VALUE, dst - GUARD_BYTES, src);
  memory.set(block, src);
  const result = module.uncompress(src, block.length, dst, dstLen);
  const guardsIntact =
    memory.subarray(dst - GUARD_BYTES, dst).every((b) => b === GUARD_VALUE) &&
    memory.subarray(dst + dstLen, src).every((b) => b === GUARD_VALUE);
  const inputIntact = memory.subarray(src).every((b, i) => b === block[i]);
  return { result, output: memory.slice(dst, dst + dstLen), guardsIntact, inputIntact };
}

/** A valid block and a way to damage it. */
const corruption = fc.record({
  original: data.map((d) => d.subarray(0, 3000)),
  damage: fc.oneof(
    fc.record({
      kind: fc.constant('flip' as const),
      flips: fc.array(fc.tuple(fc.nat(), fc.integer({ min: 1, max: 255 })), { minLength: 1, maxLength: 4 }),
    }),
    fc.record({ kind: fc.constant('truncate' as const), at: fc.nat() }),
    fc.record({
      kind: fc.constant('preamble' as const),
      bytes: fc.uint8Array({ minLength: 0, maxLength: 6, size: 'max' }),
    }),
    fc.record({
      kind: fc.constant('insert' as const),
      at: fc.nat(),
      bytes: fc.uint8Array({ minLength: 1, maxLength: 8, size: 'max' }),
    }),
  ),
  dstLenDelta: fc.oneof(fc.constant(0), fc.integer({ min: -20, max: 20 })),
});

describe('wasm snappy', () => {
  // Instances of their own, so that these run whatever the process's kernel choice.
  const module = instantiateSnappyModule();
  const snappyWasm = new WasmSnappy(instantiateSnappyModule());

  it('wasm snappy - loads in this runtime unless plain JavaScript is asked for', () => {
    if (plainKernelsForced()) {
      expect(wasmSnappy()).toBeUndefined();
      expect(wasmSnappyUnavailableReason()).toContain(KERNELS_ENV_VAR);
    } else {
      expect(wasmSnappyUnavailableReason()).toBeUndefined();
      expect(wasmSnappy()).toBeDefined();
    }
  });

  it('wasm snappy - decodes what snappyjs compresses, 0 to 70,000 bytes', () => {
    fc.assert(
      fc.property(data, (original) => {
        const out = new Uint8Array(original.length);
        expect(snappyWasm.uncompressInto(snappy.compress(original), out)).toBe(original.length);
        expect(Buffer.compare(out, original)).toBe(0);
      }),
      { numRuns: 200 },
    );
  });

  it('wasm snappy - decodes every element encoding, literals with extra length bytes and 4-byte offsets', () => {
    fc.assert(
      fc.property(fc.array(element, { maxLength: 60, size: 'max' }), (elements) => {
        const { block, expected } = encodeElements(elements);
        const { result, output, guardsIntact } = uncompressGuarded(module, block, expected.length);
        expect(result).toBe(expected.length);
        expect(guardsIntact).toBe(true);
        expect(Buffer.compare(output, expected)).toBe(0);
      }),
      { numRuns: 300 },
    );
  });

  it('wasm snappy - elements that end 0 to 16 bytes before the end of the output stay inside it', () => {
    // The 16-byte moves need 15 bytes of room past an element; every case around that limit.
    const seed = Uint8Array.from({ length: 40 }, (_, i) => (i * 37) & 0xff);
    const failures: string[] = [];
    const check = (what: string, elements: Element[]) => {
      const { block, expected } = encodeElements(elements);
      const { result, output, guardsIntact } = uncompressGuarded(module, block, expected.length);
      if (result !== expected.length || !guardsIntact || Buffer.compare(output, expected) !== 0) failures.push(what);
    };
    for (let tail = 0; tail <= 16; tail++) {
      const rest: Element[] = tail > 0 ? [{ kind: 'literal', bytes: seed.subarray(0, tail), extraBytes: 0 }] : [];
      for (let length = 1; length <= 64; length++) {
        for (const back of [1, 2, 3, 5, 7, 8, 15, 16, 17, 40]) {
          const copy: Element = { kind: 'copy', back, length, offsetBytes: 2 };
          check(`copy ${length} from ${back} back, ${tail} after`, [
            { kind: 'literal', bytes: seed, extraBytes: 0 },
            copy,
            ...rest,
          ]);
        }
      }
      for (let length = 1; length <= 140; length++) {
        const literal = Uint8Array.from({ length }, (_, i) => (i * 11) & 0xff);
        check(`literal ${length}, ${tail} after`, [{ kind: 'literal', bytes: literal, extraBytes: 0 }, ...rest]);
      }
    }
    expect(failures).toEqual([]);
  });

  it('wasm snappy - a damaged block gives an error code or wrong bytes, never a trap or a write outside the output', () => {
    fc.assert(
      fc.property(corruption, ({ original, damage, dstLenDelta }) => {
        let block = Uint8Array.from(snappy.compress(original));
        if (damage.kind === 'flip') {
          for (const [at, mask] of damage.flips) if (block.length > 0) block[at % block.length] ^= mask;
        } else if (damage.kind === 'truncate') {
          block = block.subarray(0, damage.at % (block.length + 1));
        } else if (damage.kind === 'preamble') {
          let end = 0;
          while (end < block.length && block[end]! >= 0x80) end++;
          block = Uint8Array.from([...damage.bytes, ...block.subarray(end + 1)]);
        } else {
          const at = damage.at % (block.length + 1);
          block = Uint8Array.from([...block.subarray(0, at), ...damage.bytes, ...block.subarray(at)]);
        }
        const dstLen = Math.max(0, original.length + dstLenDelta);
        const { result, guardsIntact, inputIntact } = uncompressGuarded(module, block, dstLen);
        expect(guardsIntact).toBe(true);
        expect(inputIntact).toBe(true);
        expect(result === dstLen || ERROR_CODES.includes(result)).toBe(true);
      }),
      { numRuns: 2000 },
    );
  });

  it('wasm snappy - random bytes as a block never trap or write outside the output', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200, size: 'max' }), fc.nat(300), (block, dstLen) => {
        const { result, guardsIntact } = uncompressGuarded(module, block, dstLen);
        expect(guardsIntact).toBe(true);
        expect(result === dstLen || ERROR_CODES.includes(result)).toBe(true);
      }),
      { numRuns: 2000 },
    );
  });

  it('wasm snappy - each malformation has its own error code', () => {
    const cases: [string, number[], number, number][] = [
      ['cut preamble', [0x80], 0, SnappyBlockErrorCode.BadPreamble],
      ['6-byte preamble', [0x80, 0x80, 0x80, 0x80, 0x80, 0x00], 0, SnappyBlockErrorCode.BadPreamble],
      ['length mismatch', [3, 0x08, 1, 2, 3], 4, SnappyBlockErrorCode.LengthMismatch],
      ['literal past the input', [3, 0x08, 1, 2], 3, SnappyBlockErrorCode.LiteralOverrunsInput],
      ['long literal one byte past the input', [4, 0xf0, 3, 1, 2, 3], 4, SnappyBlockErrorCode.LiteralOverrunsInput],
      [
        'literal with a huge length',
        [3, 0xfc, 0xff, 0xff, 0xff, 0xff, 1],
        3,
        SnappyBlockErrorCode.LiteralOverrunsInput,
      ],
      ['literal past the output', [2, 0x08, 1, 2, 3], 2, SnappyBlockErrorCode.LiteralOverrunsOutput],
      ['offset 0', [5, 0, 1, 0x01, 0], 5, SnappyBlockErrorCode.BadOffset],
      ['offset before the output', [5, 0, 1, 0x01, 2], 5, SnappyBlockErrorCode.BadOffset],
      ['copy past the output', [4, 0, 1, 0x01, 1], 4, SnappyBlockErrorCode.CopyOverrunsOutput],
      ['cut 2-byte offset', [5, 0, 1, 0x0e, 1], 5, SnappyBlockErrorCode.TruncatedTag],
      ['cut 4-byte offset', [5, 0, 1, 0x0f, 1, 0, 0], 5, SnappyBlockErrorCode.TruncatedTag],
      ['cut literal length', [100, 0xf0], 100, SnappyBlockErrorCode.TruncatedTag],
      ['short output', [3, 0x04, 1, 2], 3, SnappyBlockErrorCode.OutputShort],
    ];
    const got = cases.map(([what, block, dstLen]) => [
      what,
      uncompressGuarded(module, Uint8Array.from(block), dstLen).result,
    ]);
    expect(got).toEqual(cases.map(([what, , , code]) => [what, code]));
  });

  it('wasm snappy - CRC-32C equals crc-32 for 0 to 20,000 bytes', () => {
    fc.assert(
      fc.property(noiseOf(20000), (bytes) => {
        expect(snappyWasm.crc32c(bytes)).toBe(referenceCrc32c(bytes));
      }),
      { numRuns: 200 },
    );
  });

  it('wasm snappy - CRC-32C of "123456789" is the standard check value', () => {
    expect(snappyWasm.crc32c(new TextEncoder().encode('123456789'))).toBe(0xe3069283);
  });

  it('wasm snappy - CRC-32C of arrays past the memory it checksums in at once', () => {
    const bytes = new Uint8Array(300_001).map((_, i) => (i * 2654435761) >>> 24);
    expect(snappyWasm.crc32c(bytes)).toBe(referenceCrc32c(bytes));
  });

  it('wasm snappy - a frame body decodes with the CRC-32C of its bytes', () => {
    fc.assert(
      fc.property(data, fc.boolean(), (original, compressed) => {
        const out = new Uint8Array(original.length);
        const checksum = snappyWasm.decodeFrameBody(compressed ? snappy.compress(original) : original, compressed, out);
        expect(checksum).toBe(referenceCrc32c(original));
        expect(Buffer.compare(out, original)).toBe(0);
      }),
      { numRuns: 100 },
    );
  });

  it('wasm snappy - framed streams round-trip through decodeSnappyFrames', () => {
    fc.assert(
      fc.property(data, fc.nat(2), (chunk, repeat) => {
        const original = Buffer.concat(Array.from({ length: repeat + 1 }, () => chunk));
        expect(Buffer.compare(decodeSnappyFrames(encodeSnappyFrames(original)), original)).toBe(0);
      }),
      { numRuns: 100 },
    );
  });

  it('wasm snappy - a frame with a damaged block fails as snappyjs makes it fail', () => {
    const stream = Buffer.from(encodeSnappyFrames(new Uint8Array(1000).map((_, i) => i % 7)));
    // The first element after the preamble (2 bytes, 1000) becomes a copy with offset 0.
    const broken = Buffer.from(stream);
    broken[10 + 8 + 2] = 0x01;
    broken[10 + 8 + 3] = 0x00;
    expect(() => decodeSnappyFrames(broken)).toThrow(
      new SnappyFramingError('bad snappy block in frame at byte 10 of the snappy stream'),
    );
  });
});
