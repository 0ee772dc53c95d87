import type { ParameterLease } from './shard-parameters.js';

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
 * last few only. A snapshot is a lease on the parameter arrays of its version
 * (`ShardParameters.lease`), so taking one copies nothing; the store releases it when it drops
 * it, and a pull of it shares the lease, so the arrays outlive neither.
 */
export class SnapshotStore {
  private readonly snapshots: ParameterLease[] = [];

  constructor(private readonly retain = SNAPSHOTS_RETAINED) {}

  /** True when `version` is one to snapshot (every `everySteps` versions, never version 0). */
  static due(version: number, everySteps: number): boolean {
    return version > 0 && everySteps > 0 && version % everySteps === 0;
  }

  /** Keeps `snapshot`, releasing one of the same version and the oldest beyond the retained count. */
  add(snapshot: ParameterLease): void {
    const existing = this.snapshots.findIndex((s) => s.version === snapshot.version);
    if (existing >= 0) this.snapshots.splice(existing, 1)[0]!.release();
    this.snapshots.push(snapshot);
    this.snapshots.sort((a, b) => a.version - b.version);
    while (this.snapshots.length > this.retain) this.snapshots.shift()!.release();
  }

  /** The snapshot of `version`, if retained; share its lease to keep it past the next `add`. */
  get(version: number): ParameterLease | undefined {
    return this.snapshots.find((s) => s.version === version);
  }

  /** Releases every snapshot (the job leaves the process). */
  clear(): void {
    for (const s of this.snapshots.splice(0)) s.release();
  }

  /** Retained versions, oldest first. */
  versions(): number[] {
    return this.snapshots.map((s) => s.version);
  }
}
