import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  InterceptingCall,
  Server,
  ServerCredentials,
  status as GrpcStatus,
  type Interceptor,
  type ServerDuplexStream,
} from '@grpc/grpc-js';
import {
  InvalidGradientError,
  PserverClient,
  PserverTimeoutError,
  ShardedPserverClient,
  StaleGradientError,
  type ParamInfo,
  type PushRequest,
  type TensorLike,
} from '#libs/pserver-client';
import {
  EMPTY_PUSH_PULL_REPLY,
  ParameterServerService,
  type PushChunk,
  type PushPullReply,
} from '#libs/pserver-protocol';
import { startShard, type RunningShard } from '../test/in-process-shards.js';

const LR = 0.5;
const SPEC = JSON.stringify({ optimizer: { type: 'sgd', learningRate: LR } });
const PARAMS: ParamInfo[] = [
  { name: 'dense/kernel', shape: [4, 3] },
  { name: 'dense/bias', shape: [3] },
  { name: 'out/kernel', shape: [3, 2] },
  { name: 'out/bias', shape: [2] },
];

function filled(value: number, params: readonly ParamInfo[] = PARAMS): TensorLike[] {
  return params.map((p) => ({ name: p.name, shape: p.shape, data: new Float32Array(size(p.shape)).fill(value) }));
}

const size = (shape: readonly number[]) => shape.reduce((a, b) => a * b, 1);

let dir: string;
let shard: RunningShard;
/** The RPC paths every client of a test called, in order. */
let calls: string[];
const closers: { close(): void }[] = [];

const counting: Interceptor = (options, nextCall) => {
  calls.push(options.method_definition.path);
  return new InterceptingCall(nextCall(options));
};
const stepsCalls = () => calls.filter((path) => path.endsWith('/Steps')).length;

function client(options: ConstructorParameters<typeof PserverClient>[1] = {}, address = shard.address): PserverClient {
  const c = new PserverClient(address, { ...options, channelOptions: { interceptors: [counting] } });
  closers.push(c);
  return c;
}

/** A synchronous job of the given members on the shard, initialised with ones, at version 0. */
async function job(members: string[] = ['t']): Promise<ShardedPserverClient> {
  const trainers = members.map((trainerId) => {
    const t = ShardedPserverClient.fromAddresses([shard.address], { jobId: 'job-1', trainerId, params: PARAMS });
    closers.push(t);
    return t;
  });
  await trainers[0].initialize(SPEC, () => filled(1));
  for (const t of trainers) await t.join();
  return trainers[0];
}

function push(version: number, gradients: readonly TensorLike[] = filled(1), trainerId = 't'): PushRequest {
  return { jobId: 'job-1', trainerId, version, samples: 8, gradients: gradients as PushRequest['gradients'] };
}

/** Polls the shard (through `t`) until a push waits there for its step (20 ms apart, up to 10 s). */
async function untilPushPending(t: ShardedPserverClient): Promise<void> {
  for (let i = 0; i < 500 && (await t.status())[0].jobs[0].pendingPushes < 1; i++) {
    await new Promise((r) => setTimeout(r, 20));
  }
}

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tributary-steps-'));
  calls = [];
  shard = await startShard({ shard: 0, dataDir: join(dir, 'shard-0') });
});

afterEach(async () => {
  for (const c of closers.splice(0)) c.close();
  await shard.stop();
  await rm(dir, { recursive: true, force: true });
});

describe('step stream', () => {
  it('step stream - many push-pull rounds run one after another on one stream', async () => {
    await job();
    const c = client();
    for (let v = 0; v < 30; v++) {
      const { push: outcome, params } = await c.pushPull(push(v), 10_000);
      expect(outcome).toEqual({ version: v + 1, accepted: true });
      expect(params?.version).toBe(v + 1);
      expect(Array.from(params!.tensors[0].data as Float32Array)).toEqual(new Array(12).fill(1 - (v + 1) * LR));
    }
    expect(stepsCalls()).toBe(1);
    expect(calls.filter((path) => path.endsWith('/PushPull'))).toEqual([]);
  });

  it('step stream - a client made without step streams makes a PushPull call per round, which the shard still serves', async () => {
    await job();
    const c = client({ stepStreams: false });
    for (let v = 0; v < 3; v++) expect((await c.pushPull(push(v), 10_000)).params?.version).toBe(v + 1);
    expect(await c.pushPull(push(0), 10_000).catch((e: unknown) => e)).toBeInstanceOf(StaleGradientError);
    expect(calls.filter((path) => path.endsWith('/PushPull'))).toHaveLength(4);
    expect(stepsCalls()).toBe(0);
  });

  it('step stream - refused rounds (stale version, bad tensors) are answered in-band and the next round is served on the same stream', async () => {
    await job();
    const c = client();
    // Four-byte chunks: a push of many messages, refused at its first while the rest is in flight.
    const chunky = client({ maxChunkBytes: 4 });
    await c.pushPull(push(0), 10_000);
    await c.pushPull(push(1), 10_000);

    const stale = await c.pushPull(push(0), 10_000).catch((e: unknown) => e);
    expect(stale).toBeInstanceOf(StaleGradientError);
    expect(stale).toMatchObject({ code: GrpcStatus.FAILED_PRECONDITION, pushedVersion: 0, shardVersion: 2 });
    expect((stale as Error).message).toContain('stale gradient: version 0 is older than shard version 2');
    await expect(chunky.pushPull(push(1), 10_000)).rejects.toBeInstanceOf(StaleGradientError);

    const reshaped = filled(1).map((g) => (g.name === 'dense/kernel' ? { ...g, shape: [3, 4] } : g));
    const wrongShape = c.pushPull(push(2, reshaped), 10_000);
    await expect(wrongShape).rejects.toThrow(InvalidGradientError);
    await expect(wrongShape).rejects.toThrow(/"dense\/kernel": expected shape \[4, 3\], got \[3, 4\]/);
    await expect(chunky.pushPull(push(2, reshaped), 10_000)).rejects.toThrow(InvalidGradientError);
    const missing = c.pushPull(push(2, []), 10_000);
    await expect(missing).rejects.toMatchObject({ code: GrpcStatus.INVALID_ARGUMENT });
    await expect(missing).rejects.toThrow(/missing gradients for: /);
    expect((await c.status('job-1')).jobs[0]).toMatchObject({ version: 2, pendingPushes: 0 });

    const good = await chunky.pushPull(push(2), 10_000);
    expect(good.params?.version).toBe(3);
    expect((await c.pushPull(push(3), 10_000)).params?.version).toBe(4);
    expect(stepsCalls()).toBe(2);
  });

  it('step stream - a push the client cannot encode fails and the next round opens a new stream', async () => {
    await job();
    const c = client();
    await c.pushPull(push(0), 10_000);
    const float64 = filled(1).map((g) => (g.name === 'out/bias' ? { ...g, data: new Float64Array(2) } : g));
    await expect(c.pushPull(push(1, float64), 10_000)).rejects.toThrow(/"out\/bias": cannot travel as float32/);
    expect((await c.pushPull(push(1), 10_000)).params?.version).toBe(2);
    expect(stepsCalls()).toBe(2);
  });

  it('step stream - a shard restarted between rounds is reached again on a new stream', async () => {
    const t = await job();
    const port = Number(shard.address.split(':').pop());
    const c = client();
    await c.pushPull(push(0), 10_000);
    await c.pushPull(push(1), 10_000);
    await t.save();
    await shard.stop();
    shard = await startShard({ shard: 0, dataDir: join(dir, 'shard-0'), port });
    await t.join();
    // The stopped shard ended the idle stream, so the round does not go to a dead call.
    const again = await c.pushPull(push(2), 10_000);
    expect(again.push).toEqual({ version: 3, accepted: true });
    expect(again.params?.version).toBe(3);
    expect(stepsCalls()).toBe(2);
  });

  it('step stream - a stopping shard ends idle step streams instead of waiting out its grace period', async () => {
    await job();
    await client().pushPull(push(0), 10_000);
    let timer: NodeJS.Timeout | undefined;
    const stopped = shard.server.stop(60_000).then(() => 'stopped');
    const waited = new Promise((resolve) => (timer = setTimeout(resolve, 20_000, 'waited')));
    expect(await Promise.race([stopped, waited])).toBe('stopped');
    clearTimeout(timer);
  });

  it('step stream - a trainer whose stream was cut and that stays silent leaves the quorum after the cut grace, not the member TTL', async () => {
    // The shard's clock moves only when the test moves it, so a slow machine cannot run the
    // grace out before step 2 has begun.
    let clock = Date.now();
    await shard.stop();
    shard = await startShard({
      shard: 0,
      dataDir: join(dir, 'shard-0'),
      memberTtlMs: 600_000,
      cutGraceMs: 300,
      now: () => clock,
    });
    const t = await job(['t', 'a']);
    const c = client();
    const a = client();
    expect((await c.pushPull(push(0), 10_000)).params?.version).toBe(1);
    // a's push for step 1 is taken, then its stream is cut while it waits (here cancelled; a dead
    // process's connection closing looks the same to the shard), and a says nothing more.
    const stop = new AbortController();
    const cut = a.pushPull(push(1, filled(1), 'a'), 60_000, stop.signal);
    await untilPushPending(t);
    stop.abort();
    expect(await cut).toEqual({ push: { version: 1, accepted: true } });
    expect((await c.pushPull(push(1), 10_000)).params?.version).toBe(2);
    // Step 2 waits for a only until the grace has passed; the member TTL is ten minutes.
    let settled = false;
    const step2 = c.pushPull(push(2), 10_000).finally(() => (settled = true));
    await untilPushPending(t);
    // Longer than the grace in real time, which the shard's sweeps (on their timers) ignore.
    await new Promise((r) => setTimeout(r, 400));
    shard.shard.sweep();
    expect(settled).toBe(false);
    expect((await c.status('job-1')).jobs[0]!.members).toEqual(['t', 'a']);
    clock += 301;
    shard.shard.sweep();
    expect((await step2).params?.version).toBe(3);
    expect((await c.status('job-1')).jobs[0]!.members).toEqual(['t']);
  });

  it('step stream - a trainer told to stop after the outcome ends the wait and resets the stream', async () => {
    // a joined at version 0, so it counts from step 1 on, which t alone cannot complete.
    const t = await job(['t', 'a']);
    const c = client();
    const other = client();
    expect((await c.pushPull(push(0), 10_000)).params?.version).toBe(1);
    const stop = new AbortController();
    // t stops waiting for the step once its own push is taken.
    const cut = c.pushPull(push(1), 60_000, stop.signal);
    await untilPushPending(t);
    stop.abort();
    expect(await cut).toEqual({ push: { version: 1, accepted: true } });
    const completed = await other.pushPull(push(1, filled(1), 'a'), 10_000);
    expect(completed.params?.version).toBe(2);
    // The next round goes on a new stream and gets nothing of the abandoned one.
    const next = await c.pushPull(push(2), 50);
    expect(next).toEqual({ push: { version: 2, accepted: true } });
    expect(stepsCalls()).toBe(3);
  });
});

describe('step stream against a shard that does not answer', () => {
  let silent: Server;
  let address: string;
  let streams: ServerDuplexStream<PushChunk, PushPullReply>[];

  beforeEach(async () => {
    streams = [];
    silent = new Server();
    silent.addService(ParameterServerService, {
      // The first stream reads and never answers; later ones take every round at once.
      steps: (call: ServerDuplexStream<PushChunk, PushPullReply>) => {
        const index = streams.push(call) - 1;
        call.on('data', (chunk: PushChunk) => {
          if (index === 0 || !chunk.last) return;
          call.write({ ...EMPTY_PUSH_PULL_REPLY, round: chunk.round, pushVersion: 1, accepted: true, roundDone: true });
        });
        call.on('end', () => call.end());
      },
    } as never);
    const port = await new Promise<number>((resolve, reject) =>
      silent.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
    );
    address = `127.0.0.1:${port}`;
  });

  afterEach(() => {
    for (const c of closers.splice(0)) c.close();
    silent.forceShutdown();
  });

  it('step stream - a round that outlives its time fails as a timeout and the next round opens a new stream', async () => {
    calls = [];
    const c = client({ callTimeoutMs: 100 }, address);
    const late = c.pushPull(push(0), 50).catch((e: unknown) => e);
    expect(await late).toBeInstanceOf(PserverTimeoutError);
    expect(await late).toMatchObject({ code: GrpcStatus.DEADLINE_EXCEEDED });
    expect(await c.pushPull(push(0), 50)).toEqual({ push: { version: 1, accepted: true } });
    expect(streams).toHaveLength(2);
    expect(streams[0].cancelled).toBe(true);
  });
});
