import fc from 'fast-check';
import { InitChunk, PullChunk, PushChunk, PushPullReply, type Tensor } from '#proto/generated/pserver.js';
import {
  DataType,
  TensorAssembler,
  tensorParts,
  encodeInitChunk,
  encodePullChunk,
  encodePushChunk,
  encodePushPullReply,
} from './index.js';

const names = fc.string({ maxLength: 40 });
const counts = fc.oneof(fc.nat(), fc.constant(0), fc.integer({ min: 2 ** 31, max: Number.MAX_SAFE_INTEGER }));
const tensors: fc.Arbitrary<Tensor | undefined> = fc.option(
  fc.record({
    name: names,
    dtype: fc.constantFrom(
      DataType.FLOAT32,
      DataType.FLOAT16,
      DataType.BFLOAT16,
      DataType.INT32,
      DataType.FLOAT64,
      DataType.UNSPECIFIED,
    ),
    shape: fc.array(fc.nat({ max: 100_000 }), { maxLength: 5 }),
    data: fc.oneof(fc.uint8Array({ maxLength: 300 }), fc.constant(new Uint8Array(20_000).fill(7))),
    offset: fc.oneof(fc.constant(0), counts),
  }),
  { nil: undefined },
);

/** Where `data` lies in the framed gRPC message (5 bytes of prefix, then the encoded message). */
function framedDataOffset(encoded: Buffer, data: Uint8Array): number {
  if (data.length === 0) return 0;
  const at = encoded.lastIndexOf(Buffer.from(data));
  return at + 5;
}

describe('tensor wire', () => {
  it('tensor wire - PushChunk decodes with the generated decoder to what was encoded', () => {
    fc.assert(
      fc.property(
        names,
        names,
        fc.integer({ min: -5, max: 2 ** 40 }),
        fc.nat(),
        tensors,
        fc.constantFrom(DataType.UNSPECIFIED, DataType.FLOAT32, DataType.FLOAT16, DataType.BFLOAT16),
        counts,
        fc.boolean(),
        (jobId, trainerId, version, samples, tensor, pullDtype, round, last) => {
          const message: PushChunk = {
            jobId,
            trainerId,
            version,
            samples,
            tensor,
            pullWaitMs: samples % 3 === 0 ? 0 : samples,
            pullDtype,
            round,
            last,
          };
          expect(PushChunk.decode(encodePushChunk(message))).toEqual(
            PushChunk.decode(PushChunk.encode(message).finish()),
          );
        },
      ),
    );
  });

  it('tensor wire - PullChunk and InitChunk decode with the generated decoder to what was encoded', () => {
    fc.assert(
      fc.property(counts, fc.nat(), names, tensors, (version, tensorCount, jobId, tensor) => {
        const pull: PullChunk = { version, tensorCount, tensor };
        expect(PullChunk.decode(encodePullChunk(pull))).toEqual(PullChunk.decode(PullChunk.encode(pull).finish()));
        const init: InitChunk = { jobId, trainerId: jobId, tensor };
        expect(InitChunk.decode(encodeInitChunk(init))).toEqual(InitChunk.decode(InitChunk.encode(init).finish()));
      }),
    );
  });

  it('tensor wire - PushPullReply decodes with the generated decoder to what was encoded', () => {
    fc.assert(
      fc.property(
        counts,
        fc.boolean(),
        fc.boolean(),
        counts,
        fc.nat(),
        tensors,
        fc.record({
          round: counts,
          roundDone: fc.boolean(),
          statusCode: fc.nat({ max: 16 }),
          statusMessage: names,
          statusReason: names,
          statusShardVersion: fc.integer({ min: -5, max: 2 ** 40 }),
        }),
        (pushVersion, accepted, withParams, version, tensorCount, tensor, step) => {
          const reply: PushPullReply = { pushVersion, accepted, withParams, version, tensorCount, tensor, ...step };
          expect(PushPullReply.decode(encodePushPullReply(reply))).toEqual(
            PushPullReply.decode(PushPullReply.encode(reply).finish()),
          );
        },
      ),
    );
  });

  it('tensor wire - tensor data starts on an 8-byte boundary of the framed message', () => {
    fc.assert(
      fc.property(
        names,
        fc.integer({ min: 0, max: 2 ** 40 }),
        fc.integer({ min: 1, max: 70_000 }),
        (name, version, n) => {
          const data = new Uint8Array(n).fill(0xab);
          data[0] = 0xcd;
          const tensor: Tensor = { name, dtype: DataType.FLOAT32, shape: [n], data, offset: 0 };
          const encoded = encodePullChunk({ version, tensorCount: 1, tensor });
          expect(framedDataOffset(encoded, data) % 8).toBe(0);
        },
      ),
    );
  });

  it('tensor wire - tensor data starts on an 8-byte boundary of memory too, for copies out of shared memory', () => {
    // V8 copies out of a SharedArrayBuffer byte by byte unless the source and the destination
    // share their alignment; the kernel heap's arrays start on 16-byte boundaries.
    const heap = new Uint8Array(new SharedArrayBuffer(80_000), 16);
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 70_000 }), fc.nat({ max: 40 }), (n, nameLength) => {
        const data = heap.subarray(0, n).fill(0xab);
        data[0] = 0xcd;
        const tensor: Tensor = { name: 'w'.repeat(nameLength), dtype: DataType.FLOAT32, shape: [n], data, offset: 0 };
        for (const encoded of [
          encodePullChunk({ version: 3, tensorCount: 1, tensor }),
          encodePushChunk({
            jobId: 'j',
            trainerId: 't',
            version: 2,
            samples: 64,
            pullWaitMs: 0,
            pullDtype: 0,
            round: 1,
            last: true,
            tensor,
          }),
        ]) {
          expect((encoded.byteOffset + framedDataOffset(encoded, data) - 5) % 8).toBe(0);
          expect(Buffer.from(encoded.buffer, encoded.byteOffset + framedDataOffset(encoded, data) - 5, n)).toEqual(
            Buffer.from(data),
          );
        }
      }),
    );
  });

  it('tensor wire - an aligned whole tensor is viewed in place, a misaligned one is copied', () => {
    const values = Float32Array.from([1, 2, 3, 4]);
    const tensor: Tensor = {
      name: 'w',
      dtype: DataType.FLOAT32,
      shape: [4],
      data: new Uint8Array(values.buffer),
      offset: 0,
    };
    const encoded = encodePullChunk({ version: 3, tensorCount: 1, tensor });
    // A received message as gRPC hands it over: in a buffer of its own, after the 5-byte prefix.
    const received = (prefix: number) => {
      const buffer = new Uint8Array(new ArrayBuffer(prefix + encoded.length));
      buffer.set(encoded, prefix);
      return buffer;
    };
    const framed = received(5);
    const aligned = PullChunk.decode(framed.subarray(5)).tensor!;
    const viewed = new TensorAssembler().add(aligned)!;
    expect(viewed.bytes.buffer).toBe(framed.buffer);
    expect(new Float32Array(viewed.bytes.buffer, viewed.bytes.byteOffset, 4)).toEqual(values);

    const shifted = received(6);
    const misaligned = PullChunk.decode(shifted.subarray(6)).tensor!;
    const copied = new TensorAssembler().add(misaligned)!;
    expect(copied.bytes.buffer).not.toBe(shifted.buffer);
    expect(new Float32Array(copied.bytes.buffer, copied.bytes.byteOffset, 4)).toEqual(values);
  });

  it('tensor wire - a push or pull of float16 or bfloat16 tensors takes half the bytes of float32', () => {
    const data = Float32Array.from({ length: 100_000 }, (_, i) => Math.sin(i) / 100);
    const tensor = { name: 'dense/kernel', shape: [250, 400], data };
    const pushBytes = (dtype: DataType) =>
      [...tensorParts(tensor, undefined, dtype)]
        .map((part) =>
          encodePushChunk({
            jobId: 'job-1',
            trainerId: 'trainer-1',
            version: 12345,
            samples: 64,
            tensor: part,
            pullWaitMs: 30_000,
            pullDtype: dtype,
            round: 0,
            last: false,
          }),
        )
        .reduce((n, m) => n + m.length, 0);
    const pullBytes = (dtype: DataType) =>
      [...tensorParts(tensor, undefined, dtype)]
        .map((part) => encodePullChunk({ version: 12345, tensorCount: 1, tensor: part }))
        .reduce((n, m) => n + m.length, 0);
    for (const bytes of [pushBytes, pullBytes]) {
      const full = bytes(DataType.FLOAT32);
      expect(full).toBeGreaterThan(400_000);
      for (const half of [DataType.FLOAT16, DataType.BFLOAT16]) {
        // The data halves exactly; name, shape, header and alignment stay within 64 bytes.
        expect(bytes(half)).toBeGreaterThanOrEqual(200_000);
        expect(bytes(half)).toBeLessThanOrEqual(full / 2 + 64);
      }
    }
  });
});
