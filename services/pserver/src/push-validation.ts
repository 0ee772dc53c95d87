import type { KernelBackend } from '#libs/optimizer';
import { DataType, dataTypeName, elementCount, isFloatWireType, sameShape } from '#libs/pserver-protocol';
import {
  AlreadyInitializedError,
  GradientVersionError,
  InvalidRequestError,
  InvalidTensorError,
  NotInitializedError,
} from './errors.js';
import type { ParameterOwnership } from './parameter-ownership.js';
import type { ShardParameters } from './shard-parameters.js';

/** The job a `PushValidation` checks requests for. */
export interface ValidatedJob {
  jobId: string;
  shard: number;
  /** Steps by rounds (`stepsByRound`): a push for a version already stepped is stale. */
  byRound: boolean;
  /** Versions past the shard's a push may be for (`ssp`'s `maxStaleness`; else 0). */
  maxAhead: number;
}

/**
 * The checks on what trainers send a shard: initial parameters and gradients, and the version a
 * push was computed from. Each check throws a `ShardError` naming the job, parameter and what
 * was expected, and runs before anything is changed, so a refused request leaves no trace.
 * Headers are checked as the first part of a tensor arrives, before its data is assembled.
 */
export class PushValidation {
  constructor(
    private readonly job: ValidatedJob,
    private readonly params: ShardParameters,
    private readonly ownership: ParameterOwnership,
  ) {}

  /**
   * Refuses a push for a version the shard cannot take: one more than `maxAhead` past the
   * shard's, or when the job steps by rounds an earlier one; any push before initialisation.
   */
  version(pushed: number): void {
    if (!this.params.initialized) throw new NotInitializedError(this.job.jobId, this.job.shard);
    const v = this.params.version;
    if (pushed > v + this.job.maxAhead || (this.job.byRound && pushed < v)) {
      throw new GradientVersionError(this.job.jobId, pushed, v);
    }
  }

  /** Checks one init tensor's header: the shard must not be initialised yet. */
  initHeader(name: string, dtype: DataType, shape: readonly number[]): void {
    if (this.params.initialized) throw new AlreadyInitializedError(this.job.jobId, this.params.version);
    this.expectOwned(name, dtype, shape, 'init');
  }

  /**
   * Checks one gradient tensor's header: the shard must be initialised. A gradient may travel
   * as float32, float16 or bfloat16 (each tensor says which); the shard decodes it to float32.
   */
  gradientHeader(name: string, dtype: DataType, shape: readonly number[]): void {
    if (!this.params.initialized) throw new NotInitializedError(this.job.jobId, this.job.shard);
    this.expectOwned(name, dtype, shape, 'gradient');
  }

  /** Checks complete init tensors: owned names and shapes, as many values as the shape holds, all finite. */
  initTensors(tensors: readonly { name: string; shape: readonly number[]; value: Float32Array }[]): void {
    for (const t of tensors) {
      this.expectOwned(t.name, DataType.FLOAT32, t.shape, 'init');
      if (elementCount(t.shape) !== t.value.length) {
        throw new InvalidTensorError(
          t.name,
          `init "${t.name}": shape [${t.shape.join(', ')}] but ${t.value.length} values`,
        );
      }
      requireFinite(this.params.kernels, t.name, t.value, 'init');
    }
  }

  /**
   * Checks a complete push: its version, a positive number of samples, and one gradient per
   * parameter of the shard (no other), each of the parameter's size and finite.
   */
  push(version: number, samples: number, gradients: ReadonlyMap<string, Float32Array>): void {
    this.version(version);
    if (!Number.isInteger(samples) || samples < 1) {
      throw new InvalidRequestError('samples', `expected a positive integer, got ${samples}`);
    }
    for (const name of gradients.keys()) {
      if (!this.params.get(name)) throw this.unknownParam(name, 'gradient');
    }
    const missing = this.params.all.filter((p) => !gradients.has(p.name)).map((p) => p.name);
    if (missing.length > 0) {
      throw new InvalidTensorError(missing[0], `push is missing gradients for: ${missing.join(', ')}`);
    }
    for (const p of this.params.all) {
      const g = gradients.get(p.name)!;
      if (g.length !== p.value.length) {
        throw new InvalidTensorError(p.name, `gradient "${p.name}" has ${g.length} values, expected ${p.value.length}`);
      }
      requireFinite(this.params.kernels, p.name, g, 'gradient');
    }
  }

  private expectOwned(name: string, dtype: DataType, shape: readonly number[], what: 'init' | 'gradient'): void {
    const initialized = this.params.initialized;
    const expected = initialized ? this.params.get(name)?.shape : this.ownership.shapeOf(name);
    if (initialized || this.ownership.known) {
      if (!expected) throw this.unknownParam(name, what);
    }
    if (what === 'init' && dtype !== DataType.FLOAT32) {
      throw new InvalidTensorError(name, `${what} "${name}": expected float32, got ${dataTypeName(dtype)}`);
    }
    if (what === 'gradient' && !isFloatWireType(dtype)) {
      throw new InvalidTensorError(
        name,
        `${what} "${name}": expected float32, float16 or bfloat16, got ${dataTypeName(dtype)}`,
      );
    }
    if (expected && !sameShape(expected, shape)) {
      throw new InvalidTensorError(
        name,
        `${what} "${name}": expected shape [${expected.join(', ')}], got [${shape.join(', ')}]`,
      );
    }
  }

  private unknownParam(name: string, what: string): InvalidTensorError {
    const known = this.params.initialized ? this.params.names() : this.ownership.names();
    return new InvalidTensorError(
      name,
      `${what} "${name}" is not a parameter of shard ${this.job.shard} for job ${this.job.jobId} (its parameters: ${known.join(', ') || 'none'})`,
    );
  }
}

/**
 * The element type parameters are to travel in, as a pull or push-pull asked in `field`: float32
 * when unspecified, else float32, float16 or bfloat16; any other is refused.
 */
export function requestedParamsType(dtype: DataType, field: string): DataType {
  if (dtype === DataType.UNSPECIFIED) return DataType.FLOAT32;
  if (!isFloatWireType(dtype)) {
    throw new InvalidRequestError(field, `expected float32, float16 or bfloat16, got ${dataTypeName(dtype)}`);
  }
  return dtype;
}

/** Refuses an empty trainer id, which every trainer call must carry. */
export function requireTrainer(trainerId: string): void {
  if (!trainerId) throw new InvalidRequestError('trainer_id', 'must not be empty');
}

/**
 * Refuses `values` when one is not finite. The kernels' check (SIMD128 on the kernel heap, or
 * the plain loop) says whether all are; only then does the loop below look for the first bad one.
 */
function requireFinite(kernels: KernelBackend, name: string, values: Float32Array, what: string): void {
  if (kernels.allFinite(values)) return;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    // v - v is 0 for every finite v and NaN for NaN and the infinities; no global lookups in
    // the loop, which are slow in a vm context such as a test runner's.
    if (v - v !== 0) {
      throw new InvalidTensorError(name, `${what} "${name}" has a non-finite value ${v} at index ${i}`);
    }
  }
}
