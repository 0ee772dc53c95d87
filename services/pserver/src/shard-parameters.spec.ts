import { jsKernelBackend, loadSimdKernelBackend, type KernelBackend, type SimdKernelBackend } from '#libs/optimizer';
import { KernelHeap } from '#libs/wasm-simd';
import { takeStep } from './gradient-step.js';
import { parseJobSettings } from './job-settings.js';
import { ShardParameters } from './shard-parameters.js';

const settings = parseJobSettings(JSON.stringify({ optimizer: { type: 'momentum', learningRate: 0.5 } }));

/** A SIMD backend over a heap of its own, so that its allocations are this test's alone. */
function ownBackend(): SimdKernelBackend {
  return loadSimdKernelBackend(new KernelHeap());
}

function installed<B extends KernelBackend>(backend: B) {
  const params = new ShardParameters(0, backend);
  params.install(
    [
      { name: 'w', shape: [6], value: Float32Array.of(1, 2, 3, 4, 5, 6), state: [new Float32Array(6)] },
      { name: 'b', shape: [1], value: Float32Array.of(0), state: [new Float32Array(1)] },
    ],
    0,
  );
  return { params, backend };
}

const grads = (g: number) =>
  new Map([
    ['w', new Float32Array(6).fill(g)],
    ['b', Float32Array.of(g)],
  ]);

const plain = (tensors: readonly { data: Float32Array }[]) => tensors.map((t) => Array.from(t.data));

describe('shard parameters', () => {
  it('shard parameters - the optimizer state moves into the kernel heap; values move there on the first step', () => {
    const { params, backend } = installed(ownBackend());
    expect(params.all.every((p) => p.state.every((s) => backend.manages(s)))).toBe(true);
    expect(params.all.some((p) => backend.manages(p.value))).toBe(false);
    takeStep(params, grads(1), settings);
    expect(params.all.every((p) => backend.manages(p.value))).toBe(true);
    expect(params.version).toBe(1);
  });

  it('shard parameters - a leased version keeps its values while steps go on, and is reused once released', () => {
    const { params, backend } = installed(ownBackend());
    takeStep(params, grads(1), settings);
    const lease = params.lease();
    const leased = plain(lease.tensors);
    const count = backend.heap.allocationCount;
    for (let i = 0; i < 3; i++) takeStep(params, grads(2), settings);
    expect(plain(lease.tensors)).toEqual(leased);
    expect(lease.version).toBe(1);
    // Held: the leased version and the current one; the versions in between went back at once.
    expect(backend.heap.allocationCount).toBe(count + 2);
    lease.release();
    lease.release();
    expect(backend.heap.allocationCount).toBe(count);
  });

  it('shard parameters - a shared lease holds the values until it too is released', () => {
    const { params, backend } = installed(ownBackend());
    takeStep(params, grads(1), settings);
    const count = backend.heap.allocationCount;
    const lease = params.lease();
    const leased = plain(lease.tensors);
    takeStep(params, grads(2), settings);
    const shared = lease.share();
    lease.release();
    takeStep(params, grads(2), settings);
    expect(shared.version).toBe(1);
    expect(plain(shared.tensors)).toEqual(leased);
    expect(backend.heap.allocationCount).toBe(count + 2);
    expect(() => lease.share()).toThrow(/lease on version 1 was released already/);
    shared.release();
    expect(backend.heap.allocationCount).toBe(count);
  });

  it('shard parameters - the heap holds the current values and those leased, however many steps run', () => {
    const { params, backend } = installed(ownBackend());
    takeStep(params, grads(1), settings);
    const steady = backend.heap.heapBytes;
    const count = backend.heap.allocationCount;
    for (let i = 0; i < 200; i++) {
      const pulls = [params.lease(), params.lease()];
      takeStep(params, grads(0.1), settings);
      for (const p of pulls) p.release();
    }
    expect(backend.heap.allocationCount).toBe(count);
    expect(backend.heap.heapBytes).toBe(steady);
  });

  it('shard parameters - tensors() are copies of heap values that stay valid after the memory is reused', () => {
    const { params, backend } = installed(ownBackend());
    takeStep(params, grads(1), settings);
    const kept = params.tensors();
    expect(params.tensors()[0].data).toBe(kept[0].data);
    expect(kept.some((t) => backend.manages(t.data))).toBe(false);
    const before = plain(kept);
    for (let i = 0; i < 4; i++) takeStep(params, grads(3), settings);
    expect(plain(kept)).toEqual(before);
    expect(plain(params.tensors())).not.toEqual(before);
  });

  it('shard parameters - on the plain path tensors() are the value arrays themselves', () => {
    const { params } = installed(jsKernelBackend);
    takeStep(params, grads(1), settings);
    expect(params.tensors()[0].data).toBe(params.all[0].value);
    expect(params.lease().tensors[0].data).toBe(params.all[0].value);
  });

  it('shard parameters - the heap and plain paths step to the same values within float32 rounding', () => {
    const simd = installed(ownBackend());
    const js = installed(jsKernelBackend);
    for (const g of [1, -0.5, 0.25]) {
      takeStep(simd.params, grads(g), settings);
      takeStep(js.params, grads(g), settings);
    }
    const want = plain(js.params.tensors()).flat();
    plain(simd.params.tensors())
      .flat()
      .forEach((v, i) => expect(v).toBeCloseTo(want[i], 6));
  });

  it('shard parameters - disposing gives everything back, values in a lease once it ends', () => {
    const { params, backend } = installed(ownBackend());
    const empty = backend.heap.allocationCount - 2;
    takeStep(params, grads(1), settings);
    const lease = params.lease();
    params.dispose();
    expect(params.disposed).toBe(true);
    expect(params.all).toEqual([]);
    expect(backend.heap.allocationCount).toBe(empty + 2);
    lease.release();
    expect(backend.heap.allocationCount).toBe(empty);
  });
});
