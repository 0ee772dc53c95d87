import { jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';

/**
 * The keys of a KV bucket that match `filter` (a NATS subject filter over keys, `>` for all), in
 * no particular order. Unlike `kv.keys()`, which reads the keys through a consumer that has to
 * outlive a server restart to finish, this is one stream-info request per page of keys, each
 * bounded by the request timeout: it answers or throws, and never waits on a consumer. A key
 * whose latest entry is a delete marker may be listed; its `get` says so.
 */
export async function listBucketKeys(nc: NatsConnection, bucket: string, filter = '>'): Promise<string[]> {
  const jsm = await jetstreamManager(nc, { checkAPI: false });
  const prefix = `$KV.${bucket}.`;
  const info = await jsm.streams.info(`KV_${bucket}`, { subjects_filter: `${prefix}${filter}` });
  return Object.keys(info.state.subjects ?? {}).map((subject) => subject.slice(prefix.length));
}
