/** Snapshots kept per job when the job asks for no other number. */
export const SNAPSHOTS_RETAINED = 2;

/** One parameter as kept in a snapshot. The arrays are never written to again. */
export interface SnapshotTensor {
  name: string;
  shape: readonly number[];
  data: Float32Array;
}

/** A shard's parameters at one version. */
export interface Snapshot {
  version: number;
  tensors: readonly SnapshotTensor[];
}

/**
 * The parameters at the versions the evaluator asked for (`version % everySteps === 0`), the
 * last few only. A snapshot holds the arrays `JobShard.read` gives, which are never written to
 * nor reused: the parameter arrays themselves on the plain JavaScript path, their one copy per
 * version on the SIMD path (never kernel heap memory, which later steps reuse).
 */
export class SnapshotStore {
  private readonly snapshots: Snapshot[] = [];

  constructor(private readonly retain = SNAPSHOTS_RETAINED) {}

  /** True when `version` is one to snapshot (every `everySteps` versions, never version 0). */
  static due(version: number, everySteps: number): boolean {
    return version > 0 && everySteps > 0 && version % everySteps === 0;
  }

  /** Keeps `snapshot`, dropping the oldest beyond the retained count. */
  add(snapshot: Snapshot): void {
    const existing = this.snapshots.findIndex((s) => s.version === snapshot.version);
    if (existing >= 0) this.snapshots.splice(existing, 1);
    this.snapshots.push(snapshot);
    this.snapshots.sort((a, b) => a.version - b.version);
    while (this.snapshots.length > this.retain) this.snapshots.shift();
  }

  /** The snapshot of `version`, if retained. */
  get(version: number): Snapshot | undefined {
    return this.snapshots.find((s) => s.version === version);
  }

  /** Retained versions, oldest first. */
  versions(): number[] {
    return this.snapshots.map((s) => s.version);
  }
}
