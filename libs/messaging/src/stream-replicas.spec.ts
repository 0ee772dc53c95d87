import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import { startNatsCluster, startNatsServer, type NatsClusterProcesses, type ServerProcess } from '#libs/local-cluster';
import { connectNats, type NatsConnection } from './nats-connection.js';
import { JetStreamNotClusteredError, StreamReplicasError, ensureStreams, openBuckets } from './streams.js';
import { KV_BUCKETS, STREAMS } from './subjects.js';

/** Every stream Tributary declares, its KV buckets' streams included. */
const ALL_STREAMS = [...Object.values(STREAMS).map((s) => s.name), ...Object.values(KV_BUCKETS).map((b) => `KV_${b}`)];

async function replicasOf(nc: NatsConnection): Promise<Record<string, number>> {
  const jsm = await jetstreamManager(nc);
  const out: Record<string, number> = {};
  for (const name of ALL_STREAMS) out[name] = (await jsm.streams.info(name)).config.num_replicas;
  return out;
}

describe('stream replicas', () => {
  let dir: string;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'tributary-replicas-'));
  });

  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  test('stream replicas - on a 3-node cluster every stream and bucket gets 3 replicas, and streams made with 1 are raised to 3', async () => {
    let cluster: NatsClusterProcesses | undefined;
    let nc: NatsConnection | undefined;
    try {
      cluster = await startNatsCluster({ dir, nodes: 3 });
      nc = await connectNats(cluster.url, 'replicas-test');
      // Declared first with one replica (a cluster set up before TRIBUTARY_JS_REPLICAS was).
      await ensureStreams(nc, 1);
      await openBuckets(nc, 1);
      expect(Object.values(await replicasOf(nc))).toEqual(ALL_STREAMS.map(() => 1));

      await ensureStreams(nc, 3);
      await openBuckets(nc, 3);
      expect(await replicasOf(nc)).toEqual(Object.fromEntries(ALL_STREAMS.map((s) => [s, 3])));

      // More copies than nodes: refused, and the error names the stream and both counts.
      const refused = await ensureStreams(nc, 5).then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(refused).toBeInstanceOf(StreamReplicasError);
      expect((refused as Error).message).toContain(
        `stream ${STREAMS.jobs.name} has 3 replica(s) but TRIBUTARY_JS_REPLICAS asks for 5`,
      );
      expect((await replicasOf(nc))[STREAMS.jobs.name]).toBe(3);
    } finally {
      await nc?.close();
      await cluster?.stop();
    }
  }, 90_000);

  test('stream replicas - more than one replica on a server outside a cluster is refused, naming the server', async () => {
    let server: ServerProcess | undefined;
    let nc: NatsConnection | undefined;
    try {
      server = await startNatsServer({ dir });
      nc = await connectNats(server.url, 'replicas-test');
      await ensureStreams(nc, 1);
      for (const declare of [() => ensureStreams(nc!, 3), () => openBuckets(nc!, 3)]) {
        const refused = await declare().then(
          () => undefined,
          (err: unknown) => err,
        );
        expect(refused).toBeInstanceOf(JetStreamNotClusteredError);
        expect((refused as Error).message).toContain(
          `asks for 3 replicas, but the NATS server at ${server.url.replace('nats://', '')}`,
        );
      }
      // Nothing changed.
      const jsm = await jetstreamManager(nc);
      expect((await jsm.streams.info(STREAMS.jobs.name)).config.num_replicas).toBe(1);
    } finally {
      await nc?.close();
      await server?.stop();
    }
  }, 60_000);
});
