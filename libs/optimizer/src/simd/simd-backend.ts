import {
  KernelCaller,
  KernelHeap,
  KernelHeapExhaustedError,
  loadKernelModule,
  type KernelArgument,
  type KernelEntry,
} from '#libs/wasm-simd';
import type { GradientSum, KernelBackend } from '../kernel-backend.js';
import type { OptimizerHyperparams, OptimizerKernel } from '../kernel.js';
import { ADD_SCALED_MODULE } from './add-scaled.js';
import { FINITE_CHECK_MODULE } from './finite-check.js';
import { GRADIENT_SUM_MODULE, SimdGradientSum, type GradientSumEntries } from './gradient-sum.js';
import { SIMD_OPTIMIZER_KERNELS } from './registry.js';
import type { SimdOptimizerKernel } from './simd-kernel.js';

interface LoadedKernel {
  config: SimdOptimizerKernel;
  entries: Map<string, KernelEntry>;
}

/**
 * The optimizer kernels and gradient sums in WebAssembly SIMD128, over one kernel heap. Arrays
 * from `allocate` live in the heap and are worked on where they are; others are staged (see
 * `KernelCaller`). When the heap cannot grow any more, `allocate` hands out plain arrays, which
 * stay correct at the cost of staging. A kernel without a SIMD128 counterpart runs its plain
 * JavaScript loop over the same arrays.
 */
export class SimdKernelBackend implements KernelBackend {
  readonly name = 'wasm-simd';
  private readonly caller: KernelCaller;

  constructor(
    /** The memory every array of this backend lives in. */
    readonly heap: KernelHeap,
    private readonly kernels: ReadonlyMap<OptimizerKernel, LoadedKernel>,
    private readonly sums: GradientSumEntries,
    /** The finite check's export (`finite-check.wat`). */
    private readonly finiteCheck: KernelEntry,
    /** The scaled delta's export (`add-scaled.wat`). */
    private readonly scaledDelta: KernelEntry,
  ) {
    this.caller = new KernelCaller(heap);
  }

  allocate(length: number): Float32Array {
    try {
      return this.heap.allocateFloat32(length);
    } catch (err) {
      if (!(err instanceof KernelHeapExhaustedError)) throw err;
      return new Float32Array(length);
    }
  }

  manages(array: Float32Array): boolean {
    return this.heap.holds(array);
  }

  adopt(array: Float32Array): Float32Array {
    if (this.heap.holds(array)) return array;
    const copy = this.allocate(array.length);
    copy.set(array);
    return copy;
  }

  free(array: Float32Array): void {
    if (this.heap.holds(array)) this.heap.free(array);
  }

  update(
    kernel: OptimizerKernel,
    out: Float32Array,
    param: Float32Array,
    grad: Float32Array,
    state: readonly Float32Array[],
    hyper: Readonly<OptimizerHyperparams>,
    step: number,
  ): void {
    const loaded = this.kernels.get(kernel);
    if (!loaded) {
      if (out !== param) out.set(param);
      kernel.apply(out, grad, state, hyper, step);
      return;
    }
    const { entry, scalars } = loaded.config.call(hyper, step);
    const args: KernelArgument[] = [
      { array: out, role: 'out' },
      { array: param, role: 'in' },
      { array: grad, role: 'in' },
      ...state.map((array): KernelArgument => ({ array, role: 'inout' })),
    ];
    this.caller.call(kernel.name, loaded.entries.get(entry)!, args, param.length, scalars);
  }

  addScaled(out: Float32Array, param: Float32Array, delta: Float32Array, scale: number): void {
    this.caller.call(
      'add scaled',
      this.scaledDelta,
      [
        { array: out, role: 'out' },
        { array: param, role: 'in' },
        { array: delta, role: 'in' },
      ],
      param.length,
      [scale],
    );
  }

  gradientSum(length: number): GradientSum {
    return new SimdGradientSum(length, this.heap, this.caller, this.sums);
  }

  allFinite(values: Float32Array): boolean {
    return this.caller.test(this.finiteCheck, values);
  }
}

/**
 * Loads every SIMD128 kernel module (the optimizers', the gradient sum's, the finite check's,
 * the scaled delta's) over a new kernel heap.
 *
 * @throws WasmKernelUnavailableError naming the module: no SIMD in this runtime, a module not
 *   assembled, not valid, or missing an export.
 */
export function loadSimdKernelBackend(heap: KernelHeap = new KernelHeap()): SimdKernelBackend {
  const kernels = new Map<OptimizerKernel, LoadedKernel>();
  for (const config of SIMD_OPTIMIZER_KERNELS) {
    const module = loadKernelModule(config.module, heap);
    kernels.set(config.kernel, { config, entries: new Map(config.entries.map((e) => [e, module.entry(e)])) });
  }
  const sums = loadKernelModule(GRADIENT_SUM_MODULE, heap);
  return new SimdKernelBackend(
    heap,
    kernels,
    {
      scale: sums.entry('scale'),
      accumulate: sums.entry('accumulate'),
      average: sums.entry('average'),
    },
    loadKernelModule(FINITE_CHECK_MODULE, heap).entry('allFinite'),
    loadKernelModule(ADD_SCALED_MODULE, heap).entry('addScaled'),
  );
}
