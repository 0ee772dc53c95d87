/**
 * Where the evaluator gets a job's parameters from. The service uses the parameter servers
 * (`pserver-snapshot-params.ts`); tests feed parameters directly.
 */
import type { JobSpec } from '#libs/job-spec';
import type { PlainTensor } from '#libs/learner';

/** Name and shape of one model parameter, in the learner's fixed order. */
export interface ParamManifestEntry {
  name: string;
  shape: readonly number[];
}

/** Parameters of one model version, all shards merged. */
export interface VersionedParams {
  version: number;
  params: PlainTensor[];
}

/** Loads the parameters of a job's snapshots. */
export interface SnapshotParamsSource {
  /**
   * The parameters of snapshot `version` of the job, from every shard. `manifest` lists the
   * model's parameters (what the shards are asked for and how they are split).
   * @throws SnapshotParamsError when they cannot be had (a shard is gone or dropped the snapshot).
   */
  loadSnapshot(spec: JobSpec, version: number, manifest: readonly ParamManifestEntry[]): Promise<PlainTensor[]>;
  /**
   * The newest parameters of the job and their version; used to export a job that stopped
   * before any snapshot was evaluated.
   * @throws SnapshotParamsError when they cannot be had.
   */
  loadCurrent(spec: JobSpec, manifest: readonly ParamManifestEntry[]): Promise<VersionedParams>;
  /** Releases what the source holds for the job (connections, caches). */
  release(jobId: string): Promise<void>;
  /** Releases everything. */
  close(): Promise<void>;
}
