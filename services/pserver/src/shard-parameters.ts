import type { SnapshotTensor } from './snapshot-store.js';

/** One parameter as a shard holds it, with its optimizer state. */
export interface ShardParam {
  name: string;
  shape: number[];
  /** Current values; replaced (never written into) on each step, so readers may keep it. */
  value: Float32Array;
  /** The optimizer kernel's state slots, one array per slot. */
  state: Float32Array[];
}

/**
 * One job's parameters on one shard and the version they are at. Before they are installed
 * (by initialisation or from a checkpoint) there are none, and the version is the one the job
 * will start at.
 */
export class ShardParameters {
  private list: ShardParam[] = [];
  private readonly byName = new Map<string, ShardParam>();
  private current: number;
  private installed = false;

  constructor(startVersion: number) {
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

  /** Makes `params` the parameters, at `version`. */
  install(params: ShardParam[], version: number): void {
    this.list = params;
    this.byName.clear();
    for (const p of params) this.byName.set(p.name, p);
    this.current = version;
    this.installed = true;
  }

  /** Moves the version on to `version`, after a step has replaced the values. */
  advanceTo(version: number): void {
    this.current = version;
  }

  /** The current values as tensors; the arrays are never written to again. */
  tensors(): SnapshotTensor[] {
    return this.list.map(({ name, shape, value }) => ({ name, shape, data: value }));
  }
}
