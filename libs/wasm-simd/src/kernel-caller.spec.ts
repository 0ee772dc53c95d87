import fc from 'fast-check';
import { KernelArgumentError, KernelCaller, KernelHeap, type KernelArgument, type KernelEntry } from './index.js';

const heap = new KernelHeap();

/**
 * A stand-in for a WebAssembly export, reading and writing the heap's memory by byte offsets
 * like one: `acc[i] = acc[i] * s + x[i]; out[i] = acc[i] + param[i]`, with `acc` float64.
 */
function kernel(out: number, param: number, x: number, acc: number, n: number, s: number): void {
  const f32 = new Float32Array(heap.memory.buffer);
  const f64 = new Float64Array(heap.memory.buffer);
  for (let i = 0; i < n; i++) {
    const a = f64[acc / 8 + i] * s + f32[x / 4 + i];
    f64[acc / 8 + i] = a;
    f32[out / 4 + i] = a + f32[param / 4 + i];
  }
}

function reference(param: Float32Array, x: Float32Array, acc: Float64Array, s: number) {
  const a = acc.map((v, i) => v * s + x[i]);
  return { acc: a, out: Float32Array.from(param, (p, i) => a[i] + p) };
}

describe('kernel caller', () => {
  it('kernel caller - arrays in the heap, outside it, or the same array twice give the same results', () => {
    const caller = new KernelCaller(heap, 5);
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 23 }),
        fc.record({ out: fc.constantFrom('heap', 'plain', 'param'), param: fc.boolean(), x: fc.boolean() }),
        fc.boolean(),
        (n, where, accInHeap) => {
          const param = Float32Array.from({ length: n }, (_, i) => i - 3);
          const x = Float32Array.from({ length: n }, (_, i) => (i * 7) % 5);
          const acc = Float64Array.from({ length: n }, (_, i) => i / 3);
          const want = reference(param, x, acc, 0.5);

          const place = <A extends Float32Array | Float64Array>(inHeap: boolean, values: A): A => {
            if (!inHeap) return values.slice() as A;
            const a = (values instanceof Float64Array ? heap.allocateFloat64(n) : heap.allocateFloat32(n)) as A;
            a.set(values);
            return a;
          };
          const p = place(where.param, param);
          const out = where.out === 'param' ? p : place(where.out === 'heap', new Float32Array(n));
          const args: KernelArgument[] = [
            { array: out, role: 'out' },
            { array: p, role: 'in' },
            { array: place(where.x, x), role: 'in' },
            { array: place(accInHeap, acc), role: 'inout' },
          ];
          caller.call('test', kernel as KernelEntry, args, n, [0.5]);
          expect(Array.from(out)).toEqual(Array.from(want.out));
          expect(Array.from(args[3].array)).toEqual(Array.from(want.acc));
          for (const array of new Set(args.map((a) => a.array)))
            if (heap.holds(array) && array.length > 0) heap.free(array);
        },
      ),
    );
  });

  it('kernel caller - an array of another length is refused with the kernel and argument named', () => {
    const caller = new KernelCaller(heap);
    const call = () =>
      caller.call(
        'sgd',
        () => undefined,
        [
          { array: new Float32Array(4), role: 'out' },
          { array: new Float32Array(3), role: 'in' },
        ],
        4,
      );
    expect(call).toThrow(KernelArgumentError);
    expect(call).toThrow('kernel sgd: array argument 1 has 3 elements, expected 4');
  });

  it('kernel caller - more arrays outside the heap than staging slots are refused', () => {
    const caller = new KernelCaller(heap, 8, 2);
    const args: KernelArgument[] = [1, 2, 3].map(() => ({ array: new Float32Array(4), role: 'in' }));
    expect(() => caller.call('wide', () => undefined, args, 4)).toThrow(/more than 2 arrays outside the kernel heap/);
  });
  it('kernel caller - a check runs chunk by chunk on a staged array and stops at the first that fails', () => {
    const caller = new KernelCaller(heap, 4);
    // A stand-in check: 1 when no value of the chunk is negative; records each chunk it saw.
    const seen: number[][] = [];
    const noNegative = (x: number, n: number): number => {
      const chunk = Array.from(new Float32Array(heap.memory.buffer, x, n));
      seen.push(chunk);
      return chunk.every((v) => v >= 0) ? 1 : 0;
    };
    expect(caller.test(noNegative, Float32Array.of(0, 1, 2, 3, 4, 5, 6, 7, 8, 9))).toBe(true);
    expect(seen).toEqual([
      [0, 1, 2, 3],
      [4, 5, 6, 7],
      [8, 9],
    ]);
    seen.length = 0;
    expect(caller.test(noNegative, Float32Array.of(0, 1, 2, 3, 4, -5, 6, 7, 8, 9))).toBe(false);
    expect(seen).toEqual([
      [0, 1, 2, 3],
      [4, -5, 6, 7],
    ]);
    seen.length = 0;
    const inHeap = heap.allocateFloat32(6);
    inHeap.set([1, 2, 3, 4, 5, -6]);
    expect(caller.test(noNegative, inHeap)).toBe(false);
    expect(seen).toEqual([[1, 2, 3, 4, 5, -6]]);
    heap.free(inHeap);
    expect(caller.test(noNegative, new Float32Array(0))).toBe(true);
  });
});
