/**
 * `kernels`: the parameter server's math over 16M float32 values (64 MiB per array), as the
 * pserver runs it (WebAssembly SIMD128 over arrays in the kernel heap), as the plain JavaScript
 * loops, and against a `Float32Array.set` copy of 16M floats, all measured in this run:
 *
 * - accumulate: one trainer's gradient added, weighted by its examples, to the float64 sum of a
 *   synchronous step. The gradient is a plain array, as it arrives from gRPC (ours stages it
 *   through the heap a cache-sized chunk at a time).
 * - sgd, momentum, adam: one update. Ours writes the new values into another heap array, as a
 *   step does; the plain kernel updates in place (the loop alone, without the copy the plain
 *   path's step adds).
 *
 * Adam is also timed at the size of the example MLP's parameters (101,770), which a trainer in
 * `local` mode steps with our kernel after every minibatch: there the arrays fit the caches, and
 * the kernel's arithmetic, not the memory, sets its speed.
 *
 * Each figure is the bandwidth of the bytes the kernel must read and write per element (the
 * copy moves 8: it reads 4 and writes 4), so the ratio to the copy says how close a kernel runs
 * to the memory's speed: ratio = (kernel bytes / kernel time) / (copy bytes / copy time). The
 * rounds interleave every measurement, and each figure is the median over the rounds.
 */
import {
  Float64GradientSum,
  adamKernel,
  momentumKernel,
  resolveHyperparams,
  selectKernelBackend,
  sgdKernel,
  type OptimizerKernel,
} from '#libs/optimizer';
import { benchResult, median, round, type BenchResult } from '../bench-result.js';

/** Elements per array: 16M float32 values, 64 MiB. */
const ELEMENTS = 16 * 1024 * 1024;
/** Bytes a `Float32Array.set` copy reads and writes per element. */
const COPY_BYTES = 8;
/** Untimed calls of each kernel first, so both kinds of code are optimized before timing. */
const WARM_UP_CALLS = 2;
const ROUNDS = 7;
/** Target: each kernel moves its bytes at this fraction of the copy's bandwidth, or better. */
const COPY_RATIO_TARGET = 0.7;
/** Target: Adam, ours against the plain loop. */
const SPEEDUP_TARGET = 3;
/** Parameters of the example MLP 784-128-10: 784 * 128 + 128 + 128 * 10 + 10. */
const MODEL_ELEMENTS = 101_770;
/** Calls of each Adam per timed measurement at the model's size (each takes about 0.1 ms ours). */
const MODEL_CALLS = 200;
/** Bytes Adam reads and writes per element: param, grad, m, v in; m, v and the new param out. */
const ADAM_BYTES = 28;

/** One kernel of the benchmark, ours and the plain one, each run once per call. */
interface Contender {
  name: string;
  /** Bytes read and written per element. */
  bytes: number;
  ours(): void;
  plain(): void;
  /** Ours another way, timed alongside and reported in the detail. */
  variant?: { about: string; run(): void };
}

/** `array` filled with values in [-scale / 2, scale / 2) from a small generator seeded by `seed`. */
function filled(array: Float32Array, seed: number, scale = 1): Float32Array {
  let x = seed;
  for (let i = 0; i < array.length; i++) {
    x = (x * 1103515245 + 12345) % 2147483648;
    array[i] = (x / 2147483648 - 0.5) * scale;
  }
  return array;
}

function timed(run: () => void): number {
  const start = performance.now();
  run();
  return performance.now() - start;
}

export async function runKernelsBench(say: (line: string) => void): Promise<BenchResult[]> {
  const simd = selectKernelBackend('wasm-simd').backend;
  const heapArrays: Float32Array[] = [];
  const inHeap = (fill: (a: Float32Array) => Float32Array) => {
    const a = fill(simd.allocate(ELEMENTS));
    heapArrays.push(a);
    return a;
  };
  const zeros = (a: Float32Array) => a.fill(0);
  say(`filling arrays of ${ELEMENTS} float32 values`);
  const source = filled(new Float32Array(ELEMENTS), 1);
  const target = new Float32Array(ELEMENTS);
  const received = filled(new Float32Array(ELEMENTS), 2, 1e-2);
  const ours = {
    param: inHeap((a) => filled(a, 3)),
    out: inHeap(zeros),
    grad: inHeap((a) => filled(a, 2, 1e-2)),
    a: inHeap(zeros),
    b: inHeap(zeros),
  };
  const plain = {
    param: filled(new Float32Array(ELEMENTS), 3),
    grad: received,
    a: new Float32Array(ELEMENTS),
    b: new Float32Array(ELEMENTS),
  };
  const oursSum = simd.gradientSum(ELEMENTS);
  const plainSum = new Float64GradientSum(ELEMENTS);
  oursSum.add(received, 32);
  plainSum.add(received, 32);

  let oursStep = 0;
  let plainStep = 0;
  const update = (kernel: OptimizerKernel, given: object): Pick<Contender, 'ours' | 'plain'> => {
    const hyper = resolveHyperparams(kernel, given);
    const state = (s: { a: Float32Array; b: Float32Array }) => [s.a, s.b].slice(0, kernel.stateSlots.length);
    return {
      ours: () => {
        simd.update(kernel, ours.out, ours.param, ours.grad, state(ours), hyper, ++oursStep);
        [ours.param, ours.out] = [ours.out, ours.param];
      },
      plain: () => kernel.apply(plain.param, plain.grad, state(plain), hyper, ++plainStep),
    };
  };
  const contenders: Contender[] = [
    {
      name: 'accumulate',
      bytes: 20,
      ours: () => oursSum.add(received, 32),
      plain: () => plainSum.add(received, 32),
      variant: { about: 'with the gradient already in the heap', run: () => oursSum.add(ours.grad, 32) },
    },
    { name: 'sgd', bytes: 12, ...update(sgdKernel, { learningRate: 1e-3 }) },
    { name: 'momentum', bytes: 20, ...update(momentumKernel, { learningRate: 1e-3 }) },
    { name: 'adam', bytes: ADAM_BYTES, ...update(adamKernel, { learningRate: 1e-3 }) },
  ];

  say('warming up');
  for (let i = 0; i < WARM_UP_CALLS; i++) {
    target.set(source);
    for (const c of contenders) {
      c.ours();
      c.plain();
      c.variant?.run();
    }
  }
  const copyMs: number[] = [];
  const oursMs = new Map(contenders.map((c) => [c.name, [] as number[]]));
  const plainMs = new Map(contenders.map((c) => [c.name, [] as number[]]));
  const variantMs = new Map(contenders.map((c) => [c.name, [] as number[]]));
  for (let r = 0; r < ROUNDS; r++) {
    say(`round ${r + 1} of ${ROUNDS}`);
    for (const c of contenders) {
      copyMs.push(timed(() => target.set(source)));
      oursMs.get(c.name)!.push(timed(c.ours));
      plainMs.get(c.name)!.push(timed(c.plain));
      if (c.variant) variantMs.get(c.name)!.push(timed(c.variant.run));
    }
  }
  oursSum.free();
  for (const a of heapArrays) simd.free(a);

  const copy = median(copyMs);
  const gbPerSecond = (bytes: number, ms: number) => (bytes * ELEMENTS) / (ms * 1e6);
  const copyRate = gbPerSecond(COPY_BYTES, copy);
  const results = contenders.map((c) => {
    const o = median(oursMs.get(c.name)!);
    const p = median(plainMs.get(c.name)!);
    const v = c.variant && median(variantMs.get(c.name)!);
    const variant =
      c.variant && v !== undefined
        ? `; ${c.variant.about}: ${round(v, 1)} ms, ratio ${round(gbPerSecond(c.bytes, v) / copyRate, 3)}`
        : '';
    return benchResult({
      name: `kernels: ${c.name} over 16M floats, ours (WebAssembly SIMD128) vs a Float32Array.set copy`,
      figure: round(gbPerSecond(c.bytes, o), 2),
      unit: 'GB/s',
      baseline: round(copyRate, 2),
      target: COPY_RATIO_TARGET,
      detail:
        `ours ${round(o, 1)} ms, plain JS ${round(p, 1)} ms (${round(p / o, 2)}x), copy ${round(copy, 1)} ms${variant}; ` +
        `${c.bytes} bytes moved per element against the copy's ${COPY_BYTES}; ` +
        'ratio = bandwidth relative to the copy = (bytes / time) / (copy bytes / copy time); ' +
        `medians of ${ROUNDS} interleaved rounds`,
    });
  });
  const adamOurs = median(oursMs.get('adam')!);
  const adamPlain = median(plainMs.get('adam')!);
  results.push(
    benchResult({
      name: 'kernels: adam over 16M floats, ours (WebAssembly SIMD128) vs the plain JS loop',
      figure: round(gbPerSecond(ADAM_BYTES, adamOurs), 2),
      unit: 'GB/s',
      baseline: round(gbPerSecond(ADAM_BYTES, adamPlain), 2),
      target: SPEEDUP_TARGET,
      detail:
        `ours ${round(adamOurs, 1)} ms, plain JS ${round(adamPlain, 1)} ms; ratio = plain time / our time; ` +
        'speedups of the other kernels: ' +
        contenders
          .filter((c) => c.name !== 'adam')
          .map((c) => `${c.name} ${round(median(plainMs.get(c.name)!) / median(oursMs.get(c.name)!), 2)}x`)
          .join(', '),
    }),
  );
  results.push(adamAtModelSize(simd, say));
  return results;
}

/**
 * Adam over the example MLP's parameters, ours (into another heap array, as the learner's local
 * optimizer does) against the plain loop, `MODEL_CALLS` calls per measurement, interleaved over
 * `ROUNDS` rounds.
 */
function adamAtModelSize(
  simd: ReturnType<typeof selectKernelBackend>['backend'],
  say: (line: string) => void,
): BenchResult {
  say(`adam at the example model's size, ${MODEL_ELEMENTS} parameters`);
  const hyper = resolveHyperparams(adamKernel, { learningRate: 1e-3 });
  const heap = Array.from({ length: 5 }, () => simd.allocate(MODEL_ELEMENTS));
  const [param, out, grad, m, v] = heap as [Float32Array, Float32Array, Float32Array, Float32Array, Float32Array];
  filled(param, 3);
  filled(grad, 2, 1e-2);
  const plainParam = filled(new Float32Array(MODEL_ELEMENTS), 3);
  const plainGrad = filled(new Float32Array(MODEL_ELEMENTS), 2, 1e-2);
  const plainState = [new Float32Array(MODEL_ELEMENTS), new Float32Array(MODEL_ELEMENTS)];
  let step = 0;
  let plainStep = 0;
  const ours = () => {
    for (let i = 0; i < MODEL_CALLS; i++) simd.update(adamKernel, out, param, grad, [m, v], hyper, ++step);
  };
  const plainLoop = () => {
    for (let i = 0; i < MODEL_CALLS; i++) adamKernel.apply(plainParam, plainGrad, plainState, hyper, ++plainStep);
  };
  ours();
  plainLoop();
  const oursMs: number[] = [];
  const plainMs: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    oursMs.push(timed(ours) / MODEL_CALLS);
    plainMs.push(timed(plainLoop) / MODEL_CALLS);
  }
  for (const a of heap) simd.free(a);
  const o = median(oursMs);
  const p = median(plainMs);
  const gbPerSecond = (ms: number) => (ADAM_BYTES * MODEL_ELEMENTS) / (ms * 1e6);
  return benchResult({
    name: `kernels: adam over the example MLP's ${MODEL_ELEMENTS} parameters, ours (WebAssembly SIMD128) vs the plain JS loop`,
    figure: round(gbPerSecond(o), 2),
    unit: 'GB/s',
    baseline: round(gbPerSecond(p), 2),
    target: SPEEDUP_TARGET,
    detail:
      `ours ${round(o * 1000, 1)} µs, plain JS ${round(p * 1000, 1)} µs a call; ratio = plain time / our time; ` +
      `medians of ${ROUNDS} interleaved rounds of ${MODEL_CALLS} calls`,
  });
}
