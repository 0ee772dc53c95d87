/** The production {@link SnapshotParamsSource}: pulls snapshots from the job's parameter servers. */
import type { KV } from '@nats-io/kv';
import type { JobSpec } from '#libs/job-spec';
import type { PlainTensor } from '#libs/learner';
import { KvShardDirectory, ShardedPserverClient, type PserverTls } from '#libs/pserver-client';
import { PSERVER_ADDRESS_WAIT_MS, PSERVER_PULL_WAIT_MS } from './defaults.js';
import { SnapshotParamsError } from './errors.js';
import type { ParamManifestEntry, SnapshotParamsSource, VersionedParams } from './snapshot-params.js';

interface JobClient {
  client: ShardedPserverClient;
  directory: KvShardDirectory;
}

function reason(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * Pulls parameters over gRPC with a `ShardedPserverClient` per job, finding the shards in the
 * pservers bucket. A snapshot is pulled with `snapshotVersion`, so every shard answers with the
 * parameters it retained at that version.
 */
export class PserverSnapshotParams implements SnapshotParamsSource {
  private readonly clients = new Map<string, Promise<JobClient>>();

  constructor(
    private readonly pservers: KV,
    /** The evaluator's id, sent with its pulls. */
    private readonly evaluatorId: string,
    /** TLS to the parameter servers; plain text without it. */
    private readonly tls?: PserverTls,
  ) {}

  async loadSnapshot(spec: JobSpec, version: number, manifest: readonly ParamManifestEntry[]): Promise<PlainTensor[]> {
    try {
      const { client } = await this.clientOf(spec, manifest);
      const pulled = await client.pullParams(0, { snapshotVersion: version, waitMs: PSERVER_PULL_WAIT_MS });
      if (!pulled.consistent || pulled.version !== version) {
        throw new Error(`shards answered versions ${pulled.versions.join(', ')}`);
      }
      return pulled.tensors;
    } catch (cause) {
      throw new SnapshotParamsError(spec.id, version, reason(cause), { cause });
    }
  }

  async loadCurrent(spec: JobSpec, manifest: readonly ParamManifestEntry[]): Promise<VersionedParams> {
    try {
      const { client } = await this.clientOf(spec, manifest);
      const pulled = await client.pullParams(0, { sameVersion: true, waitMs: PSERVER_PULL_WAIT_MS });
      return { version: pulled.version, params: pulled.tensors };
    } catch (cause) {
      throw new SnapshotParamsError(spec.id, 'current', reason(cause), { cause });
    }
  }

  async release(jobId: string): Promise<void> {
    const entry = this.clients.get(jobId);
    if (entry === undefined) return;
    this.clients.delete(jobId);
    const { client, directory } = await entry.catch(() => ({ client: undefined, directory: undefined }));
    client?.close();
    directory?.close();
  }

  async close(): Promise<void> {
    await Promise.all([...this.clients.keys()].map((jobId) => this.release(jobId)));
  }

  private clientOf(spec: JobSpec, manifest: readonly ParamManifestEntry[]): Promise<JobClient> {
    let entry = this.clients.get(spec.id);
    if (entry === undefined) {
      entry = (async () => {
        const directory = await KvShardDirectory.open(this.pservers, { shardCount: spec.pservers.count });
        const client = new ShardedPserverClient({
          jobId: spec.id,
          trainerId: this.evaluatorId,
          params: manifest.map((p) => ({ name: p.name, shape: [...p.shape] })),
          directory,
          ...(spec.pservers.partition ? { partition: spec.pservers.partition } : {}),
          addressWaitMs: PSERVER_ADDRESS_WAIT_MS,
          ...(this.tls ? { client: { tls: this.tls } } : {}),
        });
        return { client, directory };
      })();
      this.clients.set(spec.id, entry);
      entry.catch(() => {
        if (this.clients.get(spec.id) === entry) this.clients.delete(spec.id);
      });
    }
    return entry;
  }
}
