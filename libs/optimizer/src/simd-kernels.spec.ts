import fc from 'fast-check';
import { STAGING_CHUNK_ELEMENTS } from '#libs/wasm-simd';
import {
  ADAM_FLOORS,
  Float64GradientSum,
  addScaled,
  adamScalars,
  allFinite,
  OPTIMIZER_KERNELS,
  SIMD_OPTIMIZER_KERNELS,
  createOptimizerState,
  jsKernelBackend,
  resolveHyperparams,
  rmspropScalars,
  selectKernelBackend,
  SQUARED_GRADIENT_FLOOR,
  type OptimizerHyperparams,
  type OptimizerKernel,
  type SimdKernelBackend,
} from './index.js';

const simd = selectKernelBackend('wasm-simd').backend as SimdKernelBackend;

const value = fc.float({ min: -10, max: 10, noNaN: true, noDefaultInfinity: true }).map(Math.fround);
const float32 = (min: number, max: number) => fc.double({ min, max, noNaN: true }).map(Math.fround);

/** Lengths around the vector width (0 and non-multiples of 4 included), and a few past a staging chunk. */
const length = fc.oneof(
  { weight: 9, arbitrary: fc.integer({ min: 0, max: 37 }) },
  { weight: 1, arbitrary: fc.integer({ min: STAGING_CHUNK_ELEMENTS - 3, max: STAGING_CHUNK_ELEMENTS + 9 }) },
);

/** A parameter and 1..4 gradients of one length; long ones repeat a short random pattern. */
const trajectory = length.chain((n) => {
  const values = fc
    .array(value, { minLength: Math.min(n, 64), maxLength: Math.min(n, 64) })
    .map((pattern) => Float32Array.from({ length: n }, (_, i) => pattern[i % pattern.length]));
  return fc.record({ param: values, grads: fc.array(values, { minLength: 1, maxLength: 4 }) });
});

const hyperparams = fc.record({
  learningRate: float32(1e-4, 0.5),
  momentum: float32(0, 0.99),
  useNesterov: fc.boolean(),
  beta1: float32(0.5, 0.99),
  beta2: float32(0.9, 0.9999),
  epsilon: fc.constantFrom(1e-7, 1e-8, 1e-3),
  initialAccumulatorValue: fc.oneof(fc.constant(0), float32(0, 1)),
  decay: float32(0.5, 0.99),
  centered: fc.boolean(),
  weightDecay: fc.oneof(fc.constant(0), float32(0, 0.1)),
});

/** Where the arrays of a SIMD step live: each in the kernel heap, or a plain array to stage. */
interface Placement {
  param: boolean;
  grad: boolean;
  state: boolean;
  out: 'in place' | 'heap' | 'plain';
}

const placement: fc.Arbitrary<Placement> = fc.record({
  param: fc.boolean(),
  grad: fc.boolean(),
  state: fc.boolean(),
  out: fc.constantFrom('in place', 'heap', 'plain'),
});

/** The gap between 1 and the next float32. */
const FLOAT32_EPSILON = 2 ** -23;

/**
 * The same formula in float32 operations (SIMD) and in float64 ones rounded to float32 when
 * stored (plain JavaScript) agrees within a few float32 steps of the larger of the value and 1,
 * plus what the step's own sensitivity to rounding allows (`roundingSlack`, worked out only
 * where the 16 steps are not enough): 16 steps, and 4 times the slack.
 */
function expectClose(got: Float32Array, want: Float32Array, slack: () => Float64Array, what: string): void {
  for (let i = 0; i < want.length; i++) {
    const fixed = 16 * FLOAT32_EPSILON * Math.max(1, Math.abs(want[i]));
    if (Math.abs(got[i] - want[i]) <= fixed) continue;
    const tolerance = fixed + 4 * slack()[i];
    if (!(Math.abs(got[i] - want[i]) <= tolerance)) {
      throw new Error(`${what}[${i}]: ${got[i]} vs ${want[i]} (tolerance ${tolerance})`);
    }
  }
}

interface StepInputs {
  readonly param: Float32Array;
  readonly grad: Float32Array;
  readonly state: readonly Float32Array[];
}

/** Each value one float32 rounding up (`sign` 1) or down (-1) in magnitude. */
const nudged = (values: Float32Array, sign: number): Float32Array =>
  values.map((v) => Math.fround(v * (1 + sign * FLOAT32_EPSILON)));

/**
 * How far the plain kernel's step moves, value by value, when each of its inputs moves by one
 * float32 rounding: the worst over every combination of directions. Float32 intermediates differ
 * from float64 ones by about this much; it is tiny but where a step is ill-conditioned, such as a
 * gradient that its weight decay all but cancels, then divided by the square root of a tiny
 * second moment. There no fixed count of float32 steps is the rounding of the formula.
 */
function roundingSlack(
  kernel: OptimizerKernel,
  inputs: StepInputs,
  hyper: OptimizerHyperparams,
  step: number,
): { param: Float64Array; state: Float64Array[] } {
  const run = (signs: readonly number[]) => {
    const param = signs.length === 0 ? inputs.param.slice() : nudged(inputs.param, signs[0]);
    const grad = signs.length === 0 ? inputs.grad : nudged(inputs.grad, signs[1]);
    const state = inputs.state.map((s, k) => (signs.length === 0 ? s.slice() : nudged(s, signs[2 + k])));
    jsKernelBackend.update(kernel, param, param, grad, state, hyper, step);
    return { param, state };
  };
  const exact = run([]);
  const slack = {
    param: new Float64Array(inputs.param.length),
    state: inputs.state.map((s) => new Float64Array(s.length)),
  };
  const arrays = 2 + inputs.state.length;
  for (let combination = 0; combination < 2 ** arrays; combination++) {
    const moved = run(Array.from({ length: arrays }, (_, a) => ((combination >> a) & 1 ? 1 : -1)));
    const widen = (into: Float64Array, from: Float32Array, base: Float32Array) =>
      into.forEach((d, i) => (into[i] = Math.max(d, Math.abs(from[i] - base[i]))));
    widen(slack.param, moved.param, exact.param);
    slack.state.forEach((s, k) => widen(s, moved.state[k], exact.state[k]));
  }
  return slack;
}

const zeros = (n: number, at: number, value: number): Float32Array => {
  const array = new Float32Array(n);
  array[at] = value;
  return array;
};

/**
 * Trajectories whose steps are ill-conditioned, run before the random ones. The first failed a
 * fixed tolerance of 16 float32 steps once the paths were compared over a trajectory: its second
 * gradient is all but cancelled by the weight decay of the parameter the first step made, and the
 * difference grew in the third. In the second, 3 * fround(0.1) - fround(0.3) is 0 in float32 and
 * 7.45e-9 in float64, and divided by the root of a second moment of that size it moves the
 * parameter by far more than a rounding of 1.
 */
const ILL_CONDITIONED: [{ param: Float32Array; grads: Float32Array[] }, OptimizerHyperparams, Placement][] = [
  [
    {
      param: new Float32Array(35),
      grads: [zeros(35, 23, 0.00006766682781744748), zeros(35, 23, 0.029186056926846504), new Float32Array(35)],
    },
    {
      learningRate: 0.42182615399360657,
      momentum: 0,
      useNesterov: false,
      beta1: 0.5,
      beta2: 0.8999999761581421,
      epsilon: 1e-8,
      initialAccumulatorValue: 0,
      decay: 0.9721601605415344,
      centered: true,
      weightDecay: 0.09969709068536758,
    },
    { param: false, grad: false, state: false, out: 'in place' },
  ],
  [
    { param: Float32Array.of(3, 3, 3, 3, 3), grads: [Float32Array.from({ length: 5 }, () => -0.3)] },
    {
      learningRate: Math.fround(0.5),
      momentum: 0,
      useNesterov: false,
      beta1: Math.fround(0.9),
      beta2: Math.fround(0.999),
      epsilon: 1e-8,
      initialAccumulatorValue: 0,
      decay: Math.fround(0.9),
      centered: true,
      weightDecay: Math.fround(0.1),
    },
    { param: true, grad: false, state: true, out: 'heap' },
  ],
];

function copyInto(inHeap: boolean, values: Float32Array): Float32Array {
  const array = inHeap ? simd.allocate(values.length) : new Float32Array(values.length);
  array.set(values);
  return array;
}

/** The SIMD kernel named `name`, with `given` resolved over its defaults. */
function simdKernelWith(
  name: string,
  given: Partial<OptimizerHyperparams>,
): { kernel: OptimizerKernel; hyper: OptimizerHyperparams } {
  const { kernel } = SIMD_OPTIMIZER_KERNELS.find((k) => k.kernel.name === name)!;
  return { kernel, hyper: resolveHyperparams(kernel, given) };
}

/** Step `step`'s gradient: each of `scales` times 1 to 1.4, varying from step to step. */
function gradientAbout(scales: readonly number[], step: number): Float32Array {
  return Float32Array.from(scales, (x, i) => x * (1 + ((step * 7 + i) % 5) / 10));
}

describe('simd kernels', () => {
  it.each(SIMD_OPTIMIZER_KERNELS.map((k) => [k.kernel.name, k] as const))(
    'simd kernels - %s gives the plain kernel results within float32 rounding, wherever its arrays live',
    (_name, { kernel }) => {
      fc.assert(
        fc.property(trajectory, hyperparams, placement, ({ param, grads }, hyper: OptimizerHyperparams, where) => {
          const n = param.length;
          const plain = { param: param.slice(), state: createOptimizerState(kernel, n, hyper) };
          const ours = {
            param: copyInto(where.param, param),
            state: plain.state.map((initial) => copyInto(where.state, initial)),
          };
          grads.forEach((g, i) => {
            // Each step starts both paths from the state the SIMD one reached: a step is compared,
            // not a trajectory, whose rounding differences can grow with every step.
            plain.param.set(ours.param);
            plain.state.forEach((s, k) => s.set(ours.state[k]));
            const before = { param: plain.param.slice(), grad: g, state: plain.state.map((s) => s.slice()) };
            let worked: ReturnType<typeof roundingSlack> | undefined;
            const slack = () => (worked ??= roundingSlack(kernel, before, hyper, i + 1));
            jsKernelBackend.update(kernel, plain.param, plain.param, g, plain.state, hyper, i + 1);
            const grad = copyInto(where.grad, g);
            const out =
              where.out === 'in place' ? ours.param : where.out === 'heap' ? simd.allocate(n) : new Float32Array(n);
            simd.update(kernel, out, ours.param, grad, ours.state, hyper, i + 1);
            if (out !== ours.param) {
              simd.free(ours.param);
              ours.param = out;
            }
            simd.free(grad);
            expectClose(ours.param, plain.param, () => slack().param, `step ${i + 1} param`);
            ours.state.forEach((s, k) =>
              expectClose(s, plain.state[k], () => slack().state[k], `step ${i + 1} ${kernel.stateSlots[k]}`),
            );
          });
          simd.free(ours.param);
          ours.state.forEach((s) => simd.free(s));
        }),
        { numRuns: 300, examples: ILL_CONDITIONED },
      );
    },
  );

  it('simd kernels - every optimizer kernel has a SIMD128 counterpart', () => {
    expect(SIMD_OPTIMIZER_KERNELS.map((k) => k.kernel)).toEqual(OPTIMIZER_KERNELS);
  });

  it('simd kernels - an update in place and one into another array agree to the bit', () => {
    fc.assert(
      fc.property(trajectory, hyperparams, ({ param, grads }, hyper) => {
        for (const { kernel } of SIMD_OPTIMIZER_KERNELS) {
          const n = param.length;
          const inPlace = { param: param.slice(), state: createOptimizerState(kernel, n, hyper) };
          const apart = { param: param.slice(), state: createOptimizerState(kernel, n, hyper) };
          grads.forEach((g, i) => {
            simd.update(kernel, inPlace.param, inPlace.param, g, inPlace.state, hyper, i + 1);
            const out = new Float32Array(n);
            simd.update(kernel, out, apart.param, g, apart.state, hyper, i + 1);
            apart.param = out;
          });
          expect(apart.param).toEqual(inPlace.param);
        }
      }),
      { numRuns: 100 },
    );
  });

  it.each([
    ['momentum', { useNesterov: false }],
    ['momentum', { useNesterov: true }],
    ['rmsprop', { centered: false, momentum: 0.9 }],
    ['rmsprop', { centered: true, momentum: 0.9 }],
  ] as const)(
    'simd kernels - %s %j stores decayed state below the smallest normal float32 as zero, in both paths, and keeps NaN',
    (name, given) => {
      const { kernel, hyper } = simdKernelWith(name, given);
      // Six elements: the vector loop and the scalar tail. Subnormal, normal, NaN, subnormal of
      // either sign, and the smallest normal float32, which decays into the subnormal range.
      const start = [1e-39, 1e-3, NaN, -1e-40, 1e-45, 2 ** -126];
      const slots = createOptimizerState(kernel, start.length, hyper).length;
      for (const backend of [simd, jsKernelBackend]) {
        const param = Float32Array.from(start, () => 0.5);
        const state = Array.from({ length: slots }, () => Float32Array.from(start));
        backend.update(kernel, param, param, new Float32Array(start.length), state, hyper, 2);
        state.forEach((slot, k) => {
          const flushed = [0, 1, 3, 4, 5].map((i) => slot[i]!).filter((v) => v !== 0 && Math.abs(v) < 2 ** -126);
          expect({ backend: backend.name, flushed }).toEqual({ backend: backend.name, flushed: [] });
          expect(slot[1]).not.toBe(0);
          expect(slot[2]).toBeNaN();
          if (name === 'rmsprop' && k === 0) {
            // RMSProp's mean square takes the zero gradient's square as the floor, and keeps
            // the decayed start on top of it (under a thousandth of it here).
            const floor = Math.fround(rmspropScalars(hyper).oneMinusDecay * SQUARED_GRADIENT_FLOOR);
            for (const i of [0, 5]) expect(slot[i]! / floor).toBeCloseTo(1, 2);
          } else {
            expect(slot[0]).toBe(0);
            expect(slot[5]).toBe(0);
          }
        });
      }
    },
  );

  it.each([
    ['adam', {}],
    // An L2 decay small enough to leave the gradients tiny, through the loop that adds it.
    ['adam', { weightDecay: 1e-30 }],
    ['adamw', { weightDecay: 0.01 }],
  ] as const)(
    'simd kernels - %s %j: gradients near zero and subnormal moments leave no subnormal state, in both paths, and the parameters as Adam without floors leaves them',
    (name, given) => {
      const { kernel, hyper } = simdKernelWith(name, given);
      // Seven elements (the vector loop and the scalar tail): gradients whose squares are
      // subnormal, a subnormal gradient, gradients about the floors, and a normal one.
      const scales = [1e-20, 1e-40, -3e-31, 2 ** -101, -(2 ** -57), 1e-30, 0.01];
      const n = scales.length;
      const c = adamScalars(hyper, 1);
      // The second moment is at least (1 - beta2) times the floor of a squared gradient.
      const floors = { m: ADAM_FLOORS.moment, v: Math.fround(c.oneMinusBeta2 * ADAM_FLOORS.squaredGradient) };
      const l2 = name === 'adam' ? hyper.weightDecay : 0;
      const decay = name === 'adamw' ? hyper.learningRate * hyper.weightDecay : 0;
      for (const backend of [simd, jsKernelBackend]) {
        const param = new Float32Array(n).fill(0.5);
        const state = createOptimizerState(kernel, n, hyper);
        // Subnormal moments to start from, of either sign in m, and the smallest normal float32,
        // which decays into the subnormal range.
        const start = [1e-39, -1e-40, 1e-45, 2 ** -126, 0, 1e-39, 0];
        state.forEach((slot, k) => slot.set(start.map((x) => (k === 1 ? Math.abs(x) : x))));
        // Adam in float64 without floors, from the same start.
        const ref = { p: Array.from(param), m: Array.from(state[0]!), v: Array.from(state[1]!) };
        for (let step = 1; step <= 40; step++) {
          const grad = gradientAbout(scales, step);
          backend.update(kernel, param, param, grad, state, hyper, step);
          const { stepSize, epsilonHat } = adamScalars(hyper, step);
          for (let i = 0; i < n; i++) {
            const g = grad[i]! + l2 * ref.p[i]!;
            ref.m[i] = c.beta1 * ref.m[i]! + c.oneMinusBeta1 * g;
            ref.v[i] = c.beta2 * ref.v[i]! + c.oneMinusBeta2 * g * g;
            ref.p[i] = ref.p[i]! - ref.p[i]! * decay - (stepSize * ref.m[i]!) / (Math.sqrt(ref.v[i]!) + epsilonHat);
          }
          const [m, v] = state as [Float32Array, Float32Array];
          const under = [...m]
            .filter((x) => x !== 0 && Math.abs(x) < floors.m)
            .concat([...v].filter((x) => !(x >= floors.v)));
          expect({ backend: backend.name, step, under }).toEqual({ backend: backend.name, step, under: [] });
        }
        for (let i = 0; i < n; i++) expect(param[i]).toBeCloseTo(ref.p[i]!, 6);
        // Where every gradient was tiny, the parameter moved only by its decay, as without floors.
        for (let i = 0; i < n - 1; i++) expect(param[i]).toBe(param[0]);
      }
    },
  );

  it.each([
    ['rmsprop', { centered: false, momentum: 0.9 }],
    ['rmsprop', { centered: true, momentum: 0.9 }],
    ['rmsprop', { centered: true, momentum: 0, weightDecay: 1e-30 }],
    ['adagrad', { initialAccumulatorValue: 0 }],
    ['adagrad', { initialAccumulatorValue: 0, weightDecay: 1e-30 }],
  ] as const)(
    'simd kernels - %s %j: gradients near zero take their squares as at least the floor and leave no subnormal state, in both paths, and the parameters as without the floor',
    (name, given) => {
      const { kernel, hyper } = simdKernelWith(name, given);
      // Seven elements (the vector loop and the scalar tail): gradients whose squares are
      // subnormal, a subnormal gradient, gradients about the floor, and a normal one.
      const scales = [1e-20, 1e-40, -3e-31, 2 ** -57, -(2 ** -55), 1e-30, 0.01];
      const n = scales.length;
      const { decay: d, oneMinusDecay: c } = rmspropScalars(hyper);
      const rmsprop = name === 'rmsprop';
      // The sum of squares is at least its share of one floored square.
      const least = rmsprop ? Math.fround(c * SQUARED_GRADIENT_FLOOR) : SQUARED_GRADIENT_FLOOR;
      for (const backend of [simd, jsKernelBackend]) {
        const param = new Float32Array(n).fill(0.5);
        const state = createOptimizerState(kernel, n, hyper);
        // The float64 update without the floor (nor the flush), from the same start.
        const ref = {
          p: Array.from(param),
          s: Array.from(state[0]!),
          o: new Array<number>(n).fill(0),
          a: new Array<number>(n).fill(0),
        };
        for (let step = 1; step <= 40; step++) {
          const grad = gradientAbout(scales, step);
          backend.update(kernel, param, param, grad, state, hyper, step);
          for (let i = 0; i < n; i++) {
            const g = grad[i]! + hyper.weightDecay * ref.p[i]!;
            if (rmsprop) {
              ref.s[i] = d * ref.s[i]! + c * g * g;
              ref.a[i] = d * ref.a[i]! + c * g;
              const variance = hyper.centered ? Math.max(ref.s[i]! - ref.a[i]! ** 2, 0) : ref.s[i]!;
              ref.o[i] = hyper.momentum * ref.o[i]! + (g * hyper.learningRate) / Math.sqrt(variance + hyper.epsilon);
              ref.p[i] = ref.p[i]! - ref.o[i]!;
            } else {
              ref.s[i] = ref.s[i]! + g * g;
              ref.p[i] = ref.p[i]! - (g / Math.sqrt(ref.s[i]! + hyper.epsilon)) * hyper.learningRate;
            }
          }
          const [squares, ...others] = state as Float32Array[];
          const under = [...squares!]
            .filter((x) => !(x >= least))
            .concat(others.flatMap((slot) => [...slot].filter((x) => x !== 0 && Math.abs(x) < 2 ** -126)));
          expect({ backend: backend.name, step, under }).toEqual({ backend: backend.name, step, under: [] });
        }
        for (let i = 0; i < n; i++) expect(param[i]).toBeCloseTo(ref.p[i]!, 6);
        // Where every gradient was tiny, the parameter did not move, as without the floor.
        for (let i = 0; i < n - 1; i++) expect(param[i]).toBe(0.5);
      }
    },
  );

  it.each([
    ['adam', { weightDecay: 0 }],
    ['adamw', { weightDecay: 0 }],
  ] as const)(
    'simd kernels - %s %j: a decay of zero adds nothing, so a parameter that is not finite leaves its moments as its gradient makes them, in both paths',
    (name, given) => {
      const { kernel, hyper } = simdKernelWith(name, given);
      // Six elements: the vector loop and the scalar tail, a non-finite parameter in each.
      const start = [0.5, Infinity, 0.5, -0.25, NaN, 0.5];
      const grad = Float32Array.of(0.1, 0.1, 0.1, -0.2, -0.2, 0.1);
      for (const backend of [simd, jsKernelBackend]) {
        const param = Float32Array.from(start);
        const state = createOptimizerState(kernel, start.length, hyper);
        backend.update(kernel, param, param, grad, state, hyper, 1);
        for (const slot of state) {
          expect({ backend: backend.name, infinite: slot[1], nan: slot[4] }).toEqual({
            backend: backend.name,
            infinite: slot[0],
            nan: slot[3],
          });
        }
        expect([param[1], param[4]]).toEqual([Infinity, NaN]);
      }
    },
  );

  it('simd kernels - the gradient sum gives the plain float64 average to the bit', () => {
    const contribution = length.chain((n) =>
      fc.array(
        fc.record({
          weight: fc.integer({ min: 1, max: 1000 }),
          gradient: fc
            .array(fc.float({ min: -100, max: 100, noNaN: true }).map(Math.fround), {
              minLength: Math.min(n, 64),
              maxLength: Math.min(n, 64),
            })
            .map((p) => Float32Array.from({ length: n }, (_, i) => p[i % p.length])),
          inHeap: fc.boolean(),
        }),
        { minLength: 1, maxLength: 6 },
      ),
    );
    fc.assert(
      fc.property(contribution, fc.boolean(), (contributions, outInHeap) => {
        const n = contributions[0].gradient.length;
        const plain = new Float64GradientSum(n);
        const ours = simd.gradientSum(n);
        let total = 0;
        for (const { weight, gradient, inHeap } of contributions) {
          plain.add(gradient, weight);
          const g = copyInto(inHeap, gradient);
          ours.add(g, weight);
          simd.free(g);
          total += weight;
        }
        const want = new Float32Array(n);
        plain.averageInto(want, total);
        const got = outInHeap ? simd.allocate(n) : new Float32Array(n);
        ours.averageInto(got, total);
        expect(ours.contributions).toBe(contributions.length);
        const differs = want.findIndex((w, i) => !Object.is(got[i], w));
        expect(differs < 0 ? 'all equal' : `[${differs}]: ${got[differs]} vs ${want[differs]}`).toBe('all equal');
        simd.free(got);
        ours.free();
      }),
      { numRuns: 300 },
    );
  });

  it('simd kernels - a scaled delta gives the plain float64 sum to the bit, in the heap, staged or in place', () => {
    const wide = fc.float({ min: Math.fround(-3e38), max: Math.fround(3e38), noNaN: true });
    const element = fc.oneof({ weight: 4, arbitrary: value }, { weight: 1, arbitrary: wide });
    const arrays = length.chain((n) => {
      const values = fc
        .array(element, { minLength: Math.min(n, 64), maxLength: Math.min(n, 64) })
        .map((p) => Float32Array.from({ length: n }, (_, i) => p[i % p.length]));
      return fc.record({ param: values, delta: values });
    });
    // Elastic rounds scale by the contributors; a staleness-aware step by 1 / staleness.
    const scale = fc.oneof(
      fc.integer({ min: 1, max: 8 }),
      fc.integer({ min: 1, max: 8 }).map((k) => 1 / k),
      fc.double({ min: -4, max: 4, noNaN: true }),
    );
    fc.assert(
      fc.property(arrays, scale, placement, ({ param, delta }, k, where) => {
        const want = new Float32Array(param.length);
        addScaled(want, param, delta, k);
        const p = copyInto(where.param, param);
        const d = copyInto(where.grad, delta);
        const out =
          where.out === 'in place'
            ? p
            : where.out === 'heap'
              ? simd.allocate(param.length)
              : new Float32Array(param.length);
        simd.addScaled(out, p, d, k);
        const differs = want.findIndex((w, i) => !Object.is(out[i], w));
        expect(differs < 0 ? 'all equal' : `[${differs}]: ${out[differs]} vs ${want[differs]}`).toBe('all equal');
        const js = Float32Array.from(param);
        jsKernelBackend.addScaled(js, js, delta, k);
        expect(js).toEqual(want);
        for (const a of new Set([p, d, out])) simd.free(a);
      }),
      { numRuns: 500 },
    );
  });

  it('simd kernels - the finite check agrees with a value-by-value check, in the heap or staged', () => {
    const special = fc.constantFrom(NaN, Infinity, -Infinity, -0, 3.4e38, -1.2e-38, 1e-45);
    const arrays = length.chain((n) =>
      fc.record({
        values: fc
          .array(value, { minLength: Math.min(n, 64), maxLength: Math.min(n, 64) })
          .map((p) => Float32Array.from({ length: n }, (_, i) => p[i % p.length])),
        // A few values replaced anywhere, the vector tail and past a staging chunk included.
        replaced: fc.array(fc.tuple(fc.nat(), special), { maxLength: 3 }),
        inHeap: fc.boolean(),
      }),
    );
    fc.assert(
      fc.property(arrays, ({ values, replaced, inHeap }) => {
        for (const [at, v] of replaced) if (values.length > 0) values[at % values.length] = v;
        const want = values.every((v) => Number.isFinite(v));
        const array = copyInto(inHeap, values);
        expect(simd.allFinite(array)).toBe(want);
        expect(allFinite(values)).toBe(want);
        expect(jsKernelBackend.allFinite(values)).toBe(want);
        simd.free(array);
      }),
      { numRuns: 500 },
    );
  });

  it('simd kernels - a reset sum starts again from its next contribution', () => {
    const sum = simd.gradientSum(5);
    sum.add(Float32Array.of(1, 2, 3, 4, 5), 3);
    sum.reset();
    const out = new Float32Array(5);
    sum.averageInto(out, 1);
    expect(Array.from(out)).toEqual([0, 0, 0, 0, 0]);
    sum.add(Float32Array.of(-0, 1, -1, 0.5, 2), 2);
    sum.add(Float32Array.of(0, 1, 1, 0.5, -2), 2);
    sum.averageInto(out, 4);
    expect(Array.from(out)).toEqual([0, 1, 0, 0.5, 0]);
    expect(Object.is(out[0], 0)).toBe(true);
    sum.free();
  });

  it('simd kernels - the heap takes back every array the kernels were given, adopted ones too', () => {
    const before = simd.heap.allocationCount;
    const a = simd.allocate(1000);
    const b = simd.allocate(3);
    expect(simd.manages(a)).toBe(true);
    expect(simd.manages(new Float32Array(3))).toBe(false);
    expect(simd.adopt(a)).toBe(a);
    const adopted = simd.adopt(Float32Array.of(1, 2, 3));
    expect(simd.manages(adopted)).toBe(true);
    expect(Array.from(adopted)).toEqual([1, 2, 3]);
    simd.free(adopted);
    simd.free(a);
    simd.free(b);
    simd.free(new Float32Array(3));
    expect(simd.heap.allocationCount).toBe(before);
  });
});
