import { readFile, truncate } from 'node:fs/promises';
import { join } from 'node:path';
import {
  connectNats,
  decodeJsonObject,
  encodeJson,
  openBuckets,
  type Buckets,
  type JobRecord,
  type NatsConnection,
} from '#libs/messaging';
import {
  KvShardDirectory,
  ShardedPserverClient,
  shardKey,
  type ParamInfo,
  type TensorLike,
} from '#libs/pserver-client';
import { startTestServers, type TestServers } from '../../../test/support/servers.js';
import { startService, type RunningService } from '../../../test/support/service-process.js';

/**
 * Parameter server processes (`dist/services/pserver/main.js`; run `npm run build` first)
 * killed, restarted and doubled up, against real NATS and Redis.
 */

const PARAMS: ParamInfo[] = [
  { name: 'dense/kernel', shape: [4, 3] },
  { name: 'dense/bias', shape: [3] },
];
const spec = (everySteps: number) =>
  JSON.stringify({
    optimizer: { type: 'momentum', learningRate: 0.01, momentum: 0.9 },
    checkpoint: { everySteps },
    evaluation: { everySteps: 1000 },
  });
const filled = (value: number): TensorLike[] =>
  PARAMS.map((p) => ({
    name: p.name,
    shape: p.shape,
    data: new Float32Array(p.shape.reduce((a, b) => a * b, 1)).fill(value),
  }));

let servers: TestServers;
let nc: NatsConnection;
let buckets: Buckets;
const running: RunningService[] = [];

beforeAll(async () => {
  servers = await startTestServers();
  nc = await connectNats(servers.nats.url, 'pserver recovery test');
  buckets = await openBuckets(nc);
}, 60_000);

/** Kills what a test left running (a failed one), so the next test's pserver is not kept waiting. */
async function killLeftovers(): Promise<void> {
  const alive = running.splice(0).filter((p) => p.child.exitCode === null && p.child.signalCode === null);
  for (const p of alive) p.child.kill('SIGKILL');
  await Promise.all(alive.map((p) => p.exited));
}

afterEach(killLeftovers);

afterAll(async () => {
  await killLeftovers();
  await nc?.drain();
  await servers?.stop();
});

/** Lease TTL of the test pservers: a standby takes over this long after its owner stops renewing. */
const LEASE_TTL_MS = 3_000;

function pserver(dataDir: string, shard = 0, leaseTtlMs = LEASE_TTL_MS): RunningService {
  const p = startService('pserver', {
    NATS_URL: servers.nats.url,
    REDIS_URL: servers.redis.url,
    PSERVER_SHARD: String(shard),
    PSERVER_DATA_DIR: dataDir,
    PSERVER_LEASE_TTL_MS: String(leaseTtlMs),
    LOG_LEVEL: 'log',
  });
  running.push(p);
  return p;
}

async function liveJob(jobId: string): Promise<void> {
  const record: JobRecord = { jobId, state: 'running', spec: {}, epoch: 0, startedAt: new Date().toISOString() };
  await buckets.jobs.put(jobId, encodeJson(record));
}

async function registration(shard: number): Promise<{ pid?: number; address?: string }> {
  const entry = await buckets.pservers.get(shardKey(shard));
  return entry?.operation === 'PUT' ? decodeJsonObject('kv', entry.value) : {};
}

async function registeredPid(shard: number): Promise<number | undefined> {
  return (await registration(shard)).pid;
}

/** Waits until the process's entry in the members bucket has `state`; returns the entry. */
async function memberState(pid: number | undefined, state: string): Promise<Record<string, unknown>> {
  for (;;) {
    for await (const key of await buckets.members.keys()) {
      const entry = await buckets.members.get(key);
      if (entry?.operation !== 'PUT') continue;
      const member = decodeJsonObject('kv', entry.value);
      if (member.pid === pid && member.state === state) return member;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function stop(p: RunningService): Promise<number | null> {
  p.child.kill('SIGTERM');
  return (await p.exited).code;
}

describe('pserver process recovery', () => {
  test('pserver recovery - SIGKILL mid-training: the restarted shard resumes, the trainer follows it and versions never go back', async () => {
    const jobId = 'kill-job';
    const dataDir = join(servers.dir, 'kill');
    await liveJob(jobId);
    // A lease far longer than a restart takes, so the new process finds it still held and must
    // see for itself that its holder is dead (on a loaded machine a 3 s lease may lapse first).
    const leaseTtlMs = 30_000;
    const first = pserver(dataDir, 0, leaseTtlMs);
    await first.waitFor(/pserver shard 0 ready on/);

    const directory = await KvShardDirectory.open(buckets.pservers, { shardCount: 1 });
    const client = new ShardedPserverClient({ jobId, trainerId: 'trainer-1', params: PARAMS, directory });
    await client.initialize(spec(3), () => filled(0));
    await client.join();

    // A trainer pushing and pulling in a loop; every version it is told is kept.
    const seen: number[] = [];
    let version = 0;
    let stopLoop = false;
    let loopError: unknown;
    const loop = (async () => {
      while (!stopLoop) {
        const outcome = await client.pushGradients(version, 8, filled(1));
        seen.push(...outcome.versions);
        if (outcome.stale.length > 0) version = outcome.versions[0];
        const pulled = await client.pullParams(version + (outcome.stale.length > 0 ? 0 : 1));
        seen.push(pulled.version);
        version = pulled.version;
      }
    })().catch((err: unknown) => (loopError = err));
    const reached = async (v: number) => {
      while (version < v && loopError === undefined) await new Promise((r) => setTimeout(r, 20));
      if (loopError !== undefined) throw loopError;
    };

    await reached(10);
    const before = await registration(0);
    first.child.kill('SIGKILL');
    await first.exited;
    const killedAt = Math.max(...seen);

    const second = pserver(dataDir, 0, leaseTtlMs);
    // Standing by would mean waiting out the lease: the new process must not.
    expect(await second.waitFor(/pserver shard 0 ready on|standing by/)).not.toMatch(/standing by/);
    const out = await second.waitFor(/pserver shard 0 ready on/);
    expect(out).toMatch(/previous owner .* is dead; taking over at once/);
    expect(out).toMatch(/resumed 1 job\(s\) before serving: kill-job/);
    const resumed = /job kill-job: resumed at version (\d+) from \S+ckpt-\d+\.bin \(checkpoint of version (\d+)\)/.exec(
      out,
    );
    expect(resumed).not.toBeNull();
    // The shard resumes at the last version it told anyone about, with the parameters of its last checkpoint.
    expect(Number(resumed![1])).toBeGreaterThanOrEqual(killedAt);
    expect(Number(resumed![2])).toBeLessThanOrEqual(Number(resumed![1]));
    // The trainer finds the new process through the pservers bucket.
    const after = await registration(0);
    expect(after.pid).toBe(second.child.pid);
    expect(after.address).not.toBe(before.address);

    await reached(killedAt + 10);
    stopLoop = true;
    await loop;
    expect(loopError).toBeUndefined();
    for (let i = 1; i < seen.length; i++) expect(seen[i]).toBeGreaterThanOrEqual(seen[i - 1]);

    client.close();
    directory.close();
    expect(await stop(second)).toBe(0);
  });

  test('pserver recovery - a truncated latest checkpoint: the previous one is loaded, the log names the file', async () => {
    const jobId = 'trunc-job';
    const dataDir = join(servers.dir, 'trunc');
    await liveJob(jobId);
    const first = pserver(dataDir);
    await first.waitFor(/ready on/);
    const directory = await KvShardDirectory.open(buckets.pservers, { shardCount: 1 });
    const client = new ShardedPserverClient({ jobId, trainerId: 'trainer-1', params: PARAMS, directory });
    await client.initialize(spec(1), () => filled(0));
    await client.join();
    for (let v = 0; v < 4; v++) await client.pushGradients(v, 8, filled(1));
    client.close();
    expect(await stop(first)).toBe(0);

    const meta = JSON.parse(await readFile(join(dataDir, jobId, 'checkpoint.json'), 'utf8'));
    expect(meta).toMatchObject({ version: 4 });
    const latest = join(dataDir, jobId, meta.file);
    await truncate(latest, meta.bytes - 7);

    const second = pserver(dataDir);
    const out = await second.waitFor(/ready on/);
    expect(out).toContain(
      `checkpoint ${latest}: truncated or extended: ${meta.bytes - 7} bytes, metadata says ${meta.bytes}`,
    );
    expect(out).toMatch(new RegExp(`falling back to ${meta.previous[0].file}`));
    const previous = meta.previous[0] as { file: string; version: number };
    expect(out).toMatch(
      new RegExp(
        `job trunc-job: resumed at version 4 from \\S+${previous.file} \\(checkpoint of version ${previous.version}\\)`,
      ),
    );
    const again = new ShardedPserverClient({ jobId, trainerId: 'trainer-1', params: PARAMS, directory });
    expect((await again.pullParams(0)).versions).toEqual([4]);
    again.close();
    directory.close();
    expect(await stop(second)).toBe(0);
  });

  test('pserver recovery - two processes for one shard: one serves, the other stands by and takes over when it dies', async () => {
    const dataDir = join(servers.dir, 'double');
    // A lease the owner cannot lose to a slow renewal while the others start and stop; once it
    // is killed, the standby sees for itself that its holder on this machine is dead.
    const leaseTtlMs = 30_000;
    const owner = pserver(dataDir, 5, leaseTtlMs);
    await owner.waitFor(/pserver shard 5 ready on/);
    const standby = pserver(dataDir, 5, leaseTtlMs);
    await standby.waitFor(/shard 5 is served by pserver-\S+ \(pid \d+ on .*\); standing by until its lease lapses/);
    expect(standby.output()).not.toMatch(/\bready\b/);
    expect(await registeredPid(5)).toBe(owner.child.pid);
    // `tributary ps` shows both: the owner serving shard 5 with its jobs' versions, the other standing by.
    expect(await memberState(owner.child.pid, 'serving')).toMatchObject({ role: 'pserver', shard: 5, versions: {} });
    expect(await memberState(standby.child.pid, 'standby')).toMatchObject({ role: 'pserver', shard: 5 });

    // A third one told to stop while it waits stops cleanly, without having served.
    const third = pserver(dataDir, 5, leaseTtlMs);
    await third.waitFor(/standing by/);
    const code = await stop(third);
    expect(third.output()).toMatch(/SIGTERM received while standing by; exiting/);
    expect(code).toBe(0);

    owner.child.kill('SIGKILL');
    await owner.exited;
    await standby.waitFor(/pserver shard 5 ready on/);
    expect(await registeredPid(5)).toBe(standby.child.pid);
    await memberState(standby.child.pid, 'serving');
    expect(await stop(standby)).toBe(0);
  });
});
