import { defaultKernelBackend, type KernelBackend } from '#libs/optimizer';
import type { SnapshotTensor } from './snapshot-store.js';

/** One parameter as a shard holds it, with its optimizer state. */
export interface ShardParam {
  name: string;
  shape: number[];
  /**
   * Current values; replaced (never written into) on each step. They may be kernel heap memory
   * that is reused once replaced: readers keep values through `tensors()` or `lease()` only.
   */
  value: Float32Array;
  /** The optimizer kernel's state slots, one array per slot, where the kernels run on them. */
  state: Float32Array[];
}

/** The values of every parameter at one version, and how many pulls still stream them. */
interface ValueSet {
  arrays: Float32Array[];
  leases: number;
  /** True once a step replaced them (or the parameters were dropped). */
  replaced: boolean;
  /** Copies that stay valid forever, made once for all readers of this version when needed. */
  stable?: Float32Array[];
}

/** The values of a shard's parameters at one version, held until `release`. */
export interface ParameterLease {
  version: number;
  tensors: readonly SnapshotTensor[];
  /** Ends the lease; the arrays may be reused afterwards. Calling it again does nothing. */
  release(): void;
  /**
   * Another lease on the same values, ended by its own `release` (a pull of a snapshot the
   * snapshot store holds by a lease).
   *
   * @throws Error when this lease was released already.
   */
  share(): ParameterLease;
  /**
   * The leased values as `ShardParameters.tensors` gives the current ones: arrays that stay
   * valid after the lease ends, copied once per version where the kernel backend manages them.
   *
   * @throws Error when this lease was released already.
   */
  kept(): SnapshotTensor[];
}

/**
 * One job's parameters on one shard and the version they are at. Before they are installed
 * (by initialisation or from a checkpoint) there are none, and the version is the one the job
 * will start at.
 *
 * Where the values live, and when their memory is reused: a step writes the new values into
 * fresh arrays from the kernel backend and replaces the old ones, which are never written into
 * again. On the SIMD path those arrays are kernel heap memory, which nothing frees by itself,
 * and readers keep parameter arrays for a while: a pull streams views of them over several
 * event-loop turns (`tensorParts` makes no copy), snapshots are kept for the evaluator, a
 * checkpoint encodes them after an await. Writing into the current arrays in place would hand
 * those readers torn values, and freeing replaced ones when the garbage collector finds their
 * views unreachable would not work either: the message buffers viewing them keep only the
 * memory's buffer alive, and the collector does not see heap pressure. So:
 *
 * - a reader that keeps values, or cannot say when it is done, gets `tensors()`: the arrays
 *   themselves where they are plain (never reused), else one copy per version shared by every
 *   such reader;
 * - the pull path, which knows when the last message carrying the values is serialized, takes
 *   a `lease()` on the arrays as they are, and releases it then; so does the snapshot store,
 *   which releases a snapshot when it drops it (a pull of a snapshot shares its lease);
 * - replaced arrays go back to the heap once no lease holds them, so the heap holds the
 *   current values plus those of the retained snapshots and of versions still being streamed:
 *   bounded by the snapshots retained and the pulls in flight.
 */
export class ShardParameters {
  private list: ShardParam[] = [];
  private readonly byName = new Map<string, ShardParam>();
  private values: ValueSet = { arrays: [], leases: 0, replaced: false };
  private current: number;
  private installed = false;
  private dropped = false;

  constructor(
    startVersion: number,
    /** Where the steps run and the arrays live. */
    readonly kernels: KernelBackend = defaultKernelBackend(),
  ) {
    this.current = startVersion;
  }

  /** The version of the parameters. */
  get version(): number {
    return this.current;
  }

  /** True once the parameters are installed. */
  get initialized(): boolean {
    return this.installed;
  }

  /** True once `dispose` gave the memory back; nothing may read or step the parameters then. */
  get disposed(): boolean {
    return this.dropped;
  }

  /** Every parameter, in the order they were installed. */
  get all(): readonly ShardParam[] {
    return this.list;
  }

  /** The parameter called `name`, if this shard holds it. */
  get(name: string): ShardParam | undefined {
    return this.byName.get(name);
  }

  /** Names of the parameters, in the order they were installed. */
  names(): string[] {
    return [...this.byName.keys()];
  }

  /**
   * Makes `params` the parameters, at `version`. Their optimizer state moves to where the
   * kernels run on it (the kernel heap on the SIMD path); their values stay where they are
   * until the first step replaces them.
   */
  install(params: ShardParam[], version: number): void {
    for (const p of params) p.state = p.state.map((s) => this.kernels.adopt(s));
    this.list = params;
    this.byName.clear();
    for (const p of params) this.byName.set(p.name, p);
    this.values = { arrays: params.map((p) => p.value), leases: 0, replaced: false };
    this.current = version;
    this.installed = true;
  }

  /** Moves the version on to `version` without changing the values (a step without gradients). */
  advanceTo(version: number): void {
    this.current = version;
  }

  /**
   * Makes `values` (one array per parameter, in order, from the kernel backend) the values at
   * `version`. The replaced arrays are given back once no lease holds them.
   */
  replaceValues(values: Float32Array[], version: number): void {
    const old = this.values;
    this.list.forEach((p, i) => (p.value = values[i]));
    this.values = { arrays: values, leases: 0, replaced: false };
    this.current = version;
    this.retire(old);
  }

  /**
   * The current values as tensors whose arrays are never written to again and never reused:
   * the arrays themselves where the kernel backend does not manage them, else copies made once
   * per version.
   */
  tensors(): SnapshotTensor[] {
    return this.stableOf(this.values, this.list);
  }

  /**
   * The current values as they are, without a copy, valid until `release` even if steps
   * replace them meanwhile. Release exactly once nothing reads them any more.
   */
  lease(): ParameterLease {
    const set = this.values;
    return this.leaseOf(
      set,
      this.current,
      this.list.map(({ name, shape }, i) => ({ name, shape, data: set.arrays[i] })),
    );
  }

  /**
   * Gives the parameters' memory back (the current values once their leases end); the
   * parameters are gone afterwards. Call when the job leaves this process.
   */
  dispose(): void {
    if (this.dropped) return;
    this.dropped = true;
    for (const p of this.list) for (const s of p.state) this.kernels.free(s);
    this.retire(this.values);
    this.list = [];
    this.byName.clear();
  }

  private leaseOf(set: ValueSet, version: number, tensors: readonly SnapshotTensor[]): ParameterLease {
    set.leases += 1;
    let released = false;
    return {
      version,
      tensors,
      release: () => {
        if (released) return;
        released = true;
        set.leases -= 1;
        if (set.replaced && set.leases === 0) this.free(set);
      },
      share: () => {
        if (released) throw new Error(`the lease on version ${version} was released already`);
        return this.leaseOf(set, version, tensors);
      },
      kept: () => {
        if (released) throw new Error(`the lease on version ${version} was released already`);
        return this.stableOf(set, tensors);
      },
    };
  }

  /** `set`'s values named as `names`, in arrays never reused (see `tensors`). */
  private stableOf(set: ValueSet, names: readonly { name: string; shape: readonly number[] }[]): SnapshotTensor[] {
    set.stable ??= set.arrays.map((a) => (this.kernels.manages(a) ? a.slice() : a));
    const stable = set.stable;
    return names.map(({ name, shape }, i) => ({ name, shape, data: stable[i] }));
  }

  private retire(set: ValueSet): void {
    set.replaced = true;
    if (set.leases === 0) this.free(set);
  }

  private free(set: ValueSet): void {
    for (const a of set.arrays) this.kernels.free(a);
    set.arrays = [];
  }
}
