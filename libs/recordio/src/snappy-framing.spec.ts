import fc from 'fast-check';
import snappy from 'snappyjs';
import { maskedCrc32c } from './checksums.js';
import {
  SNAPPY_MAX_BLOCK_SIZE_BYTES,
  SnappyFramingError,
  decodeSnappyFrames,
  encodeSnappyFrames,
} from './snappy-framing.js';

const IDENTIFIER = Buffer.from('ff060000734e61507059', 'hex');

/** Lists `[type, length]` of every frame after the stream identifier. */
function frames(stream: Uint8Array): [number, number][] {
  const out: [number, number][] = [];
  const bytes = Buffer.from(stream);
  for (let at = IDENTIFIER.length; at < bytes.length;) {
    const length = bytes.readUIntLE(at + 1, 3);
    out.push([bytes[at]!, length]);
    at += 4 + length;
  }
  return out;
}

function frame(type: number, body: Uint8Array): Buffer {
  const header = Buffer.alloc(4);
  header.writeUInt32LE(type | (body.length << 8));
  return Buffer.concat([header, body]);
}

function dataFrame(data: Uint8Array, compressed: boolean): Buffer {
  const checksum = Buffer.alloc(4);
  checksum.writeUInt32LE(maskedCrc32c(data));
  return frame(compressed ? 0x00 : 0x01, Buffer.concat([checksum, compressed ? snappy.compress(data) : data]));
}

describe('snappy framing', () => {
  it('snappy framing - the masked CRC-32C matches the framing specification', () => {
    // CRC-32C("123456789") = 0xe3069283; rotated right by 15 and offset by 0xa282ead8.
    expect(maskedCrc32c(new TextEncoder().encode('123456789'))).toBe(0xc78ab0e5);
  });

  it('snappy framing - data is cut into 64 KiB frames, compressed only when that saves an eighth', () => {
    const compressible = new Uint8Array(SNAPPY_MAX_BLOCK_SIZE_BYTES * 2 + 100).fill(3);
    expect(frames(encodeSnappyFrames(compressible)).map(([type]) => type)).toEqual([0x00, 0x00, 0x00]);
    const random = new Uint8Array(SNAPPY_MAX_BLOCK_SIZE_BYTES + 1);
    for (let i = 0, x = 88172645; i < random.length; i++) {
      x ^= x << 13;
      x ^= x >>> 17;
      x ^= x << 5;
      random[i] = x >>> 24;
    }
    const stream = encodeSnappyFrames(random);
    expect(Buffer.from(stream.subarray(0, 10)).equals(IDENTIFIER)).toBe(true);
    expect(frames(stream)).toEqual([
      [0x01, SNAPPY_MAX_BLOCK_SIZE_BYTES + 4],
      [0x01, 1 + 4],
    ]);
    expect(Buffer.compare(decodeSnappyFrames(stream), random)).toBe(0);
  });

  it('snappy framing - headroom is left unused in front of the stream', () => {
    const stream = encodeSnappyFrames(new Uint8Array([1, 2, 3]), 20);
    expect(Buffer.from(stream.subarray(20, 30)).equals(IDENTIFIER)).toBe(true);
    expect([...decodeSnappyFrames(stream.subarray(20))]).toEqual([1, 2, 3]);
  });

  it('snappy framing - any data round-trips', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 3000 }), fc.nat(3), (data, repeat) => {
        const input = Buffer.concat(Array.from({ length: repeat + 1 }, () => data));
        expect(Buffer.compare(decodeSnappyFrames(encodeSnappyFrames(input)), input)).toBe(0);
      }),
    );
  });

  it('snappy framing - padding, skippable frames and repeated identifiers are passed over', () => {
    const a = new TextEncoder().encode('hello hello hello hello');
    const b = new TextEncoder().encode('world');
    const stream = Buffer.concat([
      IDENTIFIER,
      dataFrame(a, true),
      frame(0xfe, Buffer.alloc(7)),
      frame(0x80, Buffer.from('skip me')),
      frame(0xfd, Buffer.alloc(0)),
      IDENTIFIER,
      dataFrame(b, false),
    ]);
    expect(new TextDecoder().decode(decodeSnappyFrames(stream))).toBe('hello hello hello helloworld');
  });

  it('snappy framing - malformed streams are refused', () => {
    const good = dataFrame(new Uint8Array([1, 2, 3]), false);
    const bad: Record<string, Buffer> = {
      'no identifier': good,
      'reserved unskippable frame': Buffer.concat([IDENTIFIER, frame(0x02, Buffer.alloc(4))]),
      'frame past the end': Buffer.concat([IDENTIFIER, good.subarray(0, good.length - 1)]),
      'cut frame header': Buffer.concat([IDENTIFIER, Buffer.from([0x01, 0x00])]),
      'frame too short for its checksum': Buffer.concat([IDENTIFIER, frame(0x01, Buffer.alloc(3))]),
      'bad identifier': Buffer.concat([Buffer.from('ff060000734e61507058', 'hex'), good]),
      'uncompressed frame over 64 KiB': Buffer.concat([
        IDENTIFIER,
        frame(0x01, Buffer.alloc(SNAPPY_MAX_BLOCK_SIZE_BYTES + 5)),
      ]),
      'wrong checksum': Buffer.concat([IDENTIFIER, frame(0x01, Buffer.from([0, 0, 0, 0, 1, 2, 3]))]),
    };
    const accepted = Object.entries(bad)
      .filter(([, stream]) => {
        try {
          decodeSnappyFrames(stream);
          return true;
        } catch (error) {
          return !(error instanceof SnappyFramingError);
        }
      })
      .map(([what]) => what);
    expect(accepted).toEqual([]);
  });
});
