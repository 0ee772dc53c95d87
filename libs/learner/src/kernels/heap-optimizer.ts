import * as tf from '@tensorflow/tfjs';
import {
  optimizerStateSlots,
  unsharedModuleOf,
  type OptimizerHyperparams,
  type SimdOptimizerKernel,
} from '#libs/optimizer';
import { compileKernelModule } from '#libs/wasm-simd';
import { backendMemory, instantiateOnMemory, type SimdKernel } from './simd-kernels.js';
import type { LocalOptimizer } from '../local-optimizer.js';
import { heapAddress, type WasmHeapBackend } from './wasm-heap.js';

const compiled = new Map<string, WebAssembly.Module>();

/**
 * An optimizer that steps the learner's variables where they lie, on the wasm backend's heap:
 * the parameter servers' SIMD128 kernel (the same `.wat`, assembled to import the backend's
 * memory) reads each variable, its gradient and its state slots in place and writes the new
 * values into a fresh tensor the variable then holds. One kernel call per variable, where
 * TF.js's own optimizers run a dozen element-wise kernels and allocate as many tensors.
 *
 * The state slots (moments, accumulators) are tensors of their own, kept from one step to the
 * next and from one round to the next, as TF.js's optimizers keep theirs; `step` counts every
 * update, as their bias corrections do.
 */
export class WasmHeapOptimizer implements LocalOptimizer {
  readonly path = 'wasm-simd';
  private readonly entries: ReadonlyMap<string, SimdKernel>;
  private readonly slots: readonly string[];
  private readonly state = new Map<string, tf.Tensor[]>();
  private step = 0;

  /**
   * @throws WasmKernelUnavailableError when the kernel's module is missing or cannot import the
   *   backend's memory (the caller then steps with TF.js's optimizer).
   */
  constructor(
    private readonly backend: WasmHeapBackend,
    private readonly config: SimdOptimizerKernel,
    private readonly hyper: Readonly<OptimizerHyperparams>,
  ) {
    const memory = backendMemory(backend);
    const url = unsharedModuleOf(config);
    let module = compiled.get(url.href);
    if (module === undefined) {
      module = compileKernelModule(url);
      compiled.set(url.href, module);
    }
    this.entries = instantiateOnMemory(module, memory, url.pathname, config.entries);
    this.slots = optimizerStateSlots(config.kernel, hyper);
  }

  /** One update of every variable from its gradient (float32, of the variable's shape). */
  applyGradients(variables: readonly tf.Variable[], gradients: readonly tf.Tensor[]): void {
    this.step += 1;
    const { entry, scalars } = this.config.call(this.hyper, this.step);
    const kernel = this.entries.get(entry)!;
    variables.forEach((variable, i) => {
      const gradient = gradients[i]!;
      if (!tf.util.arraysEqual(gradient.shape, variable.shape)) {
        throw new RangeError(
          `gradient of ${variable.name} has shape [${gradient.shape.join(', ')}], the variable [${variable.shape.join(', ')}]`,
        );
      }
      const slots = this.slotsOf(variable);
      const out = this.backend.makeOutput([...variable.shape], 'float32');
      const address = (t: tf.TensorInfo): number => heapAddress(this.backend, t);
      kernel(address(out), address(variable), address(gradient), ...slots.map(address), variable.size, ...scalars);
      const updated = tf.engine().makeTensorFromTensorInfo(out);
      variable.assign(updated);
      updated.dispose();
    });
  }

  /** Frees the state slots. */
  dispose(): void {
    for (const slots of this.state.values()) tf.dispose(slots);
    this.state.clear();
  }

  /** The variable's state slots, made (at their initial values) on its first update. */
  private slotsOf(variable: tf.Variable): tf.Tensor[] {
    let slots = this.state.get(variable.name);
    if (slots === undefined) {
      slots = this.slots.map((slot) =>
        tf.keep(tf.fill([...variable.shape], this.config.kernel.initialValue?.(slot, this.hyper) ?? 0, 'float32')),
      );
      this.state.set(variable.name, slots);
    }
    return slots;
  }
}
