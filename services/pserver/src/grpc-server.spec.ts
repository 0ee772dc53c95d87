import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { credentials, makeGenericClientConstructor, status as GrpcStatus, type ServiceError } from '@grpc/grpc-js';
import {
  InvalidGradientError,
  PserverClient,
  PserverError,
  ShardCallError,
  ShardedPserverClient,
  StaleGradientError,
  type ParamInfo,
  type TensorLike,
} from '#libs/pserver-client';
import { loadSimdKernelBackend } from '#libs/optimizer';
import {
  DataType,
  ParameterServerClient,
  SHARD_VERSION_METADATA_KEY,
  wireClock,
  type PullChunk,
  type PushPullReply,
} from '#libs/pserver-protocol';
import { KernelHeap } from '#libs/wasm-simd';
import { startShards, type RunningShard } from '../test/in-process-shards.js';

const LR = 0.5;
const SPEC = JSON.stringify({ optimizer: { type: 'sgd', learningRate: LR }, evaluation: { everySteps: 2 } });
const PARAMS: ParamInfo[] = [
  { name: 'dense/kernel', shape: [4, 3] },
  { name: 'dense/bias', shape: [3] },
  { name: 'out/kernel', shape: [3, 2] },
  { name: 'out/bias', shape: [2] },
];

const size = (shape: readonly number[]) => shape.reduce((a, b) => a * b, 1);

function filled(params: readonly ParamInfo[], f: (name: string, i: number) => number): TensorLike[] {
  return params.map((p) => {
    const data = new Float32Array(size(p.shape));
    for (let i = 0; i < data.length; i++) data[i] = f(p.name, i);
    return { name: p.name, shape: p.shape, data };
  });
}

/** Byte equality of two typed arrays (jest's deep equality is slow on millions of elements). */
function sameBytes(a: ArrayBufferView, b: ArrayBufferView): boolean {
  return Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));
}

let dir: string;
let shards: RunningShard[];
let addresses: string[];
let snapshots: string[];
const clients: { close(): void }[] = [];

async function start(count = 2, initLeaseMs = 10_000, now?: () => number): Promise<void> {
  shards = await startShards(count, {
    dataDir: dir,
    initLeaseMs,
    now,
    onSnapshot: (jobId, shard, version) => snapshots.push(`${jobId}/${shard}/${version}`),
  });
  addresses = shards.map((s) => s.address);
}

function trainer(id: string, params: readonly ParamInfo[] = PARAMS, jobId = 'job-1'): ShardedPserverClient {
  const c = ShardedPserverClient.fromAddresses(addresses, { jobId, trainerId: id, params, unavailableRetryMs: 0 });
  clients.push(c);
  return c;
}

/**
 * Trainers a and b in the quorum of a synchronous job, b counted from version 1, and the shards
 * at version 1 after a's push-pull alone completed step 0 (`zero`).
 */
async function twoTrainersAtVersionOne() {
  const a = trainer('a');
  const b = trainer('b');
  await a.initialize(SPEC, () => filled(PARAMS, () => 1));
  await a.join();
  await b.join();
  const grad = filled(PARAMS, () => 1);
  const zero = await a.pushPull(0, 8, grad, { waitMs: 10_000, sameVersion: true });
  return { a, b, grad, zero };
}

/** Polls `probe` until it holds (20 ms apart, up to 10 s). */
async function waitUntil(probe: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (await probe()) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error('condition not met in 10 s');
}

function shardClient(k: number): PserverClient {
  const c = new PserverClient(addresses[k], { shard: k });
  clients.push(c);
  return c;
}

async function stopAll(): Promise<void> {
  for (const c of clients.splice(0)) c.close();
  await Promise.all(shards.map((s) => s.stop()));
}

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tributary-pserver-'));
  snapshots = [];
  await start();
});

afterEach(async () => {
  await stopAll();
  await rm(dir, { recursive: true, force: true });
});

describe('pserver over gRPC', () => {
  it('pserver grpc - of three concurrent trainers exactly one is elected; all pull identical params', async () => {
    const trainers = ['t1', 't2', 't3'].map((id) => trainer(id));
    const outcomes = await Promise.all(
      trainers.map((t, i) => t.initialize(SPEC, () => filled(PARAMS, () => i + 1), { pollMs: 20 })),
    );
    expect(outcomes.filter((o) => o.elected)).toHaveLength(1);
    const winner = outcomes.findIndex((o) => o.elected);
    const pulls = await Promise.all(trainers.map((t) => t.pullParams(0)));
    for (const pull of pulls) {
      expect(pull.versions).toEqual([0, 0]);
      expect(pull.tensors.map((t) => t.name)).toEqual(PARAMS.map((p) => p.name));
      expect(pull.tensors).toEqual(pulls[0].tensors);
      expect(pull.tensors[0].data[0]).toBe(winner + 1);
      expect(pull.tensors[0].dtype).toBe('float32');
    }
    // Both shards hold a part of the model.
    const status = await trainers[0].status();
    expect(status.map((s) => s.jobs[0].tensors).every((n) => n > 0)).toBe(true);
  });

  it('pserver grpc - a lapsed init lease passes to the next trainer', async () => {
    // The shards' clock moves only when the test moves it, so the lease lapses when the test
    // says and not when a loaded machine is slow to connect the second trainer.
    let clock = Date.now();
    await stopAll();
    await start(2, 150, () => clock);
    const quitter = trainer('quitter');
    expect((await quitter.beginInit(SPEC)).elected).toBe(true);
    const next = trainer('next');
    expect(await next.beginInit(SPEC)).toMatchObject({ elected: false, leaseHolder: 'quitter' });
    clock += 149;
    expect(await next.beginInit(SPEC)).toMatchObject({ elected: false, leaseHolder: 'quitter' });
    clock += 1;
    expect(await next.waitInitialized({ pollMs: 20 })).toBe('elected');
    await expect(quitter.finishInit()).rejects.toThrow(/does not hold the init lease \(held by next\)/);
    await next.initParams(filled(PARAMS, () => 7));
    await next.finishInit();
    expect(await quitter.waitInitialized()).toBe('initialized');
    expect((await quitter.pullParams(0)).tensors[1].data[0]).toBe(7);
  });

  it('pserver grpc - an 8 MiB tensor round-trips through init, push and pull', async () => {
    const params: ParamInfo[] = [
      { name: 'big', shape: [2048, 1024] },
      { name: 'small', shape: [5] },
    ];
    const t = trainer('t', params);
    const init = filled(params, (_, i) => (i % 1000) / 7);
    await t.initialize(SPEC, () => init);
    const pulled = await t.pullParams(0);
    expect(pulled.tensors[0].data.length).toBe(2 * 1024 * 1024);
    expect(sameBytes(pulled.tensors[0].data, init[0].data)).toBe(true);
    const grad = filled(params, (_, i) => ((i % 13) - 6) / 8);
    await t.join();
    const outcome = await t.pushGradients(pulled.versions, 64, grad);
    expect(outcome).toEqual({ versions: [1, 1], accepted: [true, true], stale: [] });
    const after = await t.pullParams(1);
    const g = grad[0].data as Float32Array;
    const expected = Float32Array.from(init[0].data as Float32Array);
    for (let i = 0; i < expected.length; i++) expected[i] -= LR * g[i];
    expect(sameBytes(after.tensors[0].data, expected)).toBe(true);
  });

  it('pserver grpc - concurrent 8 MiB pushes from three trainers of one process and a pull beside them all complete', async () => {
    await stopAll();
    shards = await startShards(2, { dataDir: dir, kernels: loadSimdKernelBackend(new KernelHeap()) });
    addresses = shards.map((s) => s.address);
    const params: ParamInfo[] = [
      { name: 'big', shape: [2048, 1024] },
      { name: 'small', shape: [5] },
    ];
    const spec = JSON.stringify({ optimizer: { type: 'sgd', learningRate: 0.5 }, training: { mode: 'async' } });
    const [first, ...others] = ['a', 'b', 'c', 'reader'].map((id) => trainer(id, params));
    await first!.initialize(spec, () => filled(params, () => 1));
    const pushers = [first!, ...others.slice(0, 2)];
    for (const t of pushers) await t.join();
    const rounds = 2;
    await Promise.all([
      ...pushers.map(async (t) => {
        for (let i = 0; i < rounds; i++)
          await t.pushGradients(
            [0, 0],
            8,
            filled(params, () => 0.25),
          );
      }),
      (async () => {
        for (let i = 0; i < rounds; i++) await others[2]!.pullParams(0);
      })(),
    ]);
    // Six asynchronous steps of 0.5 x 0.25 each, every push taken.
    const after = await others[2]!.pullParams(6);
    expect(after.versions).toEqual([6, 6]);
    expect(after.tensors[0]!.data.every((v) => v === 1 - 6 * 0.125)).toBe(true);
  });

  it('pserver grpc - a pull held up by its client keeps its version while steps go on, then gives the heap its memory back', async () => {
    await stopAll();
    // A heap of this test's own, so that its allocations can be counted.
    const kernels = loadSimdKernelBackend(new KernelHeap());
    shards = await startShards(1, { dataDir: dir, kernels });
    addresses = shards.map((s) => s.address);
    const elements = 1024 * 1024;
    const params: ParamInfo[] = [{ name: 'big', shape: [1024, 1024] }];
    const spec = JSON.stringify({ optimizer: { type: 'sgd', learningRate: 0.5 }, training: { mode: 'async' } });
    await trainer('t', params).initialize(spec, () => filled(params, () => 1));
    const job = await shards[0].shard.job('job-1');
    const ones = new Map([['big', new Float32Array(elements).fill(1)]]);
    // Version 1: the values now live in the kernel heap, every element 0.5.
    job.push('t', 0, 1, ones);
    const settled = kernels.heap.allocationCount;

    // HTTP/2's default 64 KiB window and a client that reads nothing yet: most of the pull's
    // four parts wait in the server, not serialized, while three steps replace the values.
    const raw = new ParameterServerClient(addresses[0], credentials.createInsecure());
    clients.push(raw);
    const call = raw.pullParams({
      jobId: 'job-1',
      trainerId: 'r',
      minVersion: 1,
      waitMs: 1_000,
      dtype: DataType.FLOAT32,
    });
    await once(call, 'readable');
    for (let i = 0; i < 3; i++) job.push('t', 0, 1, ones);
    expect(job.version).toBe(4);

    const pulled = new Float32Array(elements);
    const bytes = new Uint8Array(pulled.buffer);
    let version = -1;
    for await (const chunk of call as AsyncIterable<PullChunk>) {
      version = chunk.version;
      bytes.set(chunk.tensor!.data, chunk.tensor!.offset);
    }
    expect(version).toBe(1);
    expect(pulled.every((v) => v === 0.5)).toBe(true);
    // Once the pull's messages are serialized, only the current values are held again.
    await waitUntil(async () => kernels.heap.allocationCount === settled);
  });

  it('pserver grpc - a shard that owns no parameter still steps in lockstep', async () => {
    const params: ParamInfo[] = [{ name: 'only', shape: [3] }];
    const t = trainer('t', params);
    await t.initialize(SPEC, () => filled(params, () => 1));
    expect(t.shardMap.namesOf(1)).toEqual([]);
    await t.join();
    for (let v = 0; v < 3; v++) {
      const pulled = await t.pullParams(v);
      expect(pulled.versions).toEqual([v, v]);
      await t.pushGradients(
        pulled.versions,
        2,
        filled(params, () => 1),
      );
    }
    const last = await t.pullParams(3);
    expect(last.versions).toEqual([3, 3]);
    expect(Array.from(last.tensors[0].data)).toEqual([-0.5, -0.5, -0.5]);
  });

  it('pserver grpc - a trainer joining while the shards are a version apart counts from one version on both, and its first pull does not wait for itself', async () => {
    const a = trainer('a');
    const b = trainer('b');
    await a.initialize(SPEC, () => filled(PARAMS, () => 1));
    await a.join();
    const grad = filled(PARAMS, () => 1);
    // a's push for version 0 is taken by shard 1 first: b joins while shard 0 is at 0 and shard 1 at 1.
    const push = (k: number, version: number) =>
      shardClient(k).pushGradients({
        jobId: 'job-1',
        trainerId: 'a',
        version,
        samples: 8,
        gradients: grad
          .filter((g) => a.shardMap.shardOf(g.name) === k)
          .map((g) => ({ ...g, data: g.data as Float32Array })),
      });
    await push(1, 0);
    // Shard 0 would count b from 1 and shard 1 from 2: both count it from 2.
    expect(await b.join()).toEqual({ versions: [0, 1], countedFrom: [2, 2] });
    // a goes on: version 1 steps on a's pushes alone on both shards.
    await push(0, 0);
    await push(1, 1);
    await push(0, 1);
    // b's first pull wants one version on both shards and gets it at once. Were b counted from 1
    // on shard 0, shard 0 would wait at version 1 for b, and the pull for version 2 on both
    // would run out of time with the shards at [1, 2].
    const pulled = await b.pullParams(0, { waitMs: 2_000 });
    expect(pulled).toMatchObject({ versions: [2, 2], consistent: true });
    // Version 2 waits for b on both shards.
    await Promise.all([push(0, 2), push(1, 2)]);
    expect((await a.status()).map((r) => r.jobs[0]?.version)).toEqual([2, 2]);
    await b.pushGradients(pulled.versions, 8, grad);
    expect((await a.status()).map((r) => r.jobs[0]?.version)).toEqual([3, 3]);
  });

  it('pserver grpc - push-pull answers a synchronous push with the parameters of the step it belongs to', async () => {
    const { a, b, grad, zero } = await twoTrainersAtVersionOne();
    expect(zero.params?.versions).toEqual([1, 1]);
    // a's reply waits on the shards until b's push completes the step.
    const first = a.pushPull(1, 8, grad, { waitMs: 10_000, sameVersion: true });
    const second = await b.pushPull(1, 8, grad, { waitMs: 10_000, sameVersion: true });
    const pulled = await a.pullParams(2);
    for (const outcome of [await first, second]) {
      expect(outcome).toMatchObject({ accepted: [true, true], stale: [] });
      expect(outcome.params?.versions).toEqual([2, 2]);
      expect(outcome.params?.tensors).toEqual(pulled.tensors);
    }
    expect(pulled.tensors[0].data[0]).toBeCloseTo(1 - 2 * LR);

    // A step nobody completes in time: the push is taken, the parameters do not come.
    const alone = await a.pushPull(2, 8, grad, { waitMs: 50, sameVersion: true });
    expect(alone).toMatchObject({ accepted: [true, true], stale: [] });
    expect(alone.params).toBeUndefined();
    expect((await a.status()).map((st) => st.jobs[0].pendingPushes)).toEqual([1, 1]);

    // A stale push-pull is refused as a stale push is, with no parameters.
    const stale = await a.pushPull(0, 8, grad, { waitMs: 50, sameVersion: true });
    expect(stale.stale).toHaveLength(2);
    expect(stale.params).toBeUndefined();
  });

  it('pserver grpc - push-pull parameters ready at once come with the outcome; otherwise the outcome comes first, alone', async () => {
    await twoTrainersAtVersionOne();
    const owned = (await shards[0].shard.job('job-1')).read().tensors;
    const raw = new ParameterServerClient(addresses[0], credentials.createInsecure());
    clients.push(raw);
    // A push for version 1 to shard 0, the replies as they come.
    const pushFor = (trainerId: string) => {
      const call = raw.pushPull();
      const replies: PushPullReply[] = [];
      call.on('data', (r: PushPullReply) => replies.push(r));
      const ended = once(call, 'end');
      for (const t of owned) {
        const ones = new Float32Array(t.data.length).fill(1);
        call.write({
          jobId: 'job-1',
          trainerId,
          version: 1,
          samples: 8,
          pullWaitMs: 10_000,
          pullDtype: DataType.FLOAT32,
          round: 0,
          last: false,
          tensor: {
            name: t.name,
            dtype: DataType.FLOAT32,
            shape: [...t.shape],
            data: new Uint8Array(ones.buffer),
            offset: 0,
          },
        });
      }
      call.end();
      return { replies, ended };
    };
    // a's push alone leaves step 1 waiting for b: the outcome comes at once, alone.
    const waiting = pushFor('a');
    await waitUntil(async () => waiting.replies.length > 0);
    expect(waiting.replies[0]).toMatchObject({ accepted: true, withParams: false });
    // b's push completes the step: its first message already carries parameters.
    const completing = pushFor('b');
    await Promise.all([waiting.ended, completing.ended]);
    expect(completing.replies[0]).toMatchObject({ accepted: true, withParams: true, version: 2 });
    expect(completing.replies).toHaveLength(owned.length);
    expect(waiting.replies.slice(1)).toHaveLength(owned.length);
    for (const r of [...waiting.replies.slice(1), ...completing.replies]) {
      expect(r).toMatchObject({ accepted: true, withParams: true, version: 2, tensorCount: owned.length });
    }
  });

  it('pserver grpc - a push-pull whose trainer must stop ends its wait once the push is taken', async () => {
    const { a, grad } = await twoTrainersAtVersionOne();
    // Step 1 waits for b, which never pushes; a is told to stop meanwhile.
    const stop = new AbortController();
    const cut = a.pushPull(1, 8, grad, { waitMs: 60_000, sameVersion: true, signal: stop.signal });
    await waitUntil(async () => (await a.status()).every((st) => st.jobs[0].pendingPushes === 1));
    stop.abort();
    const outcome = await cut;
    expect(outcome).toMatchObject({ accepted: [true, true], stale: [] });
    expect(outcome.params).toBeUndefined();
    expect((await a.status()).map((st) => st.jobs[0].version)).toEqual([1, 1]);
  });

  it('pserver grpc - the step phases give the barrier, the update and the codec time per step', async () => {
    const { a, b, grad } = await twoTrainersAtVersionOne();
    for (const shard of shards) shard.shard.stepPhases();
    expect(shards[0]!.shard.stepPhases()).toBeUndefined();
    const before = wireClock.read();
    await Promise.all([
      a.pushPull(1, 8, grad, { waitMs: 10_000, sameVersion: true }),
      b.pushPull(1, 8, grad, { waitMs: 10_000, sameVersion: true }),
    ]);
    const after = wireClock.read();
    // Trainers and shards share this process, so its clock counts both sides' messages.
    expect(after.encodeMs).toBeGreaterThan(before.encodeMs);
    expect(after.decodeMs).toBeGreaterThan(before.decodeMs);
    for (const shard of shards) {
      const phases = shard.shard.stepPhases()!;
      expect(Object.keys(phases).sort()).toEqual(['barrier', 'decode', 'encode', 'update']);
      for (const ms of Object.values(phases)) expect(ms).toBeGreaterThanOrEqual(0);
    }
    const [first, second] = shards.map((shard) => shard.shard);
    // Each call covers the steps since the one before.
    expect(first!.stepPhases()).toBeUndefined();
    expect(second!.stepPhases()).toBeUndefined();
  });

  it('pserver grpc - push-pull answers an asynchronous push with the parameters after it', async () => {
    const spec = JSON.stringify({ ...JSON.parse(SPEC), training: { mode: 'async' } });
    const t = trainer('t', PARAMS, 'job-async');
    await t.initialize(spec, () => filled(PARAMS, () => 1));
    const grad = filled(PARAMS, () => 1);
    const outcome = await t.pushPull(0, 8, grad, { waitMs: 10_000, sameVersion: false });
    expect(outcome.versions).toEqual([1, 1]);
    expect(outcome.params?.versions).toEqual([1, 1]);
    expect(outcome.params?.tensors).toEqual((await t.pullParams(1)).tensors);
  });

  it('pserver grpc - a stale push is refused with FAILED_PRECONDITION and changes nothing', async () => {
    const t = trainer('t');
    await t.initialize(SPEC, () => filled(PARAMS, () => 1));
    await t.join();
    const grad = filled(PARAMS, () => 1);
    await t.pushGradients(0, 8, grad);
    const before = await t.pullParams(1);
    const outcome = await t.pushGradients(0, 8, grad);
    expect(outcome.stale).toHaveLength(2);
    expect(outcome.accepted).toEqual([false, false]);
    const stale = outcome.stale[0];
    expect(stale).toBeInstanceOf(StaleGradientError);
    expect(stale).toMatchObject({ code: GrpcStatus.FAILED_PRECONDITION, pushedVersion: 0, shardVersion: 1 });
    expect(stale.message).toContain('stale gradient: version 0 is older than shard version 1');
    expect((stale.cause as ServiceError).metadata.get(SHARD_VERSION_METADATA_KEY)).toEqual(['1']);
    expect(await t.pullParams(0)).toEqual(before);
    expect((await t.status()).map((s) => s.jobs[0].pendingPushes)).toEqual([0, 0]);
  });

  it('pserver grpc - a wrong shape is refused and the server keeps serving', async () => {
    const t = trainer('t');
    await t.initialize(SPEC, () => filled(PARAMS, () => 1));
    const owner = t.shardMap.shardOf('dense/kernel');
    const names = t.shardMap.namesOf(owner);
    const good = filled(PARAMS, () => 0.5).filter((g) => names.includes(g.name));
    const bad = good.map((g) => (g.name === 'dense/kernel' ? { ...g, shape: [3, 4] } : g));
    const direct = shardClient(owner);
    const refusal = direct.pushGradients({
      jobId: 'job-1',
      trainerId: 't',
      version: 0,
      samples: 1,
      gradients: bad as never,
    });
    await expect(refusal).rejects.toThrow(InvalidGradientError);
    await expect(refusal).rejects.toThrow(/"dense\/kernel": expected shape \[4, 3\], got \[3, 4\]/);
    const missing = direct.pushGradients({ jobId: 'job-1', trainerId: 't', version: 0, samples: 1, gradients: [] });
    await expect(missing).rejects.toMatchObject({ code: GrpcStatus.INVALID_ARGUMENT });
    await expect(missing).rejects.toThrow(/missing gradients for: /);
    const wrongDtype = { name: 'dense/kernel', shape: [4, 3], data: new Float64Array(12) };
    await expect(
      direct.pushGradients({ jobId: 'job-1', trainerId: 't', version: 0, samples: 1, gradients: [wrongDtype] }),
    ).rejects.toThrow(/"dense\/kernel": cannot travel as float32: it holds float64/);
    expect((await direct.status('job-1')).jobs[0]).toMatchObject({ version: 0, pendingPushes: 0 });
    await expect(
      direct.pushGradients({ jobId: 'job-1', trainerId: 't', version: 0, samples: 1, gradients: good as never }),
    ).resolves.toEqual({ version: 1, accepted: true });
  });

  it('pserver grpc - garbage bytes get a clear error and the server keeps serving', async () => {
    const Raw = makeGenericClientConstructor(
      {
        status: {
          path: '/tributary.pserver.v1.ParameterServer/Status',
          requestStream: false,
          responseStream: false,
          requestSerialize: (b: Buffer) => b,
          requestDeserialize: (b: Buffer) => b,
          responseSerialize: (b: Buffer) => b,
          responseDeserialize: (b: Buffer) => b,
        },
      },
      'Raw',
    );
    const raw = new Raw(addresses[0], credentials.createInsecure()) as unknown as {
      status(b: Buffer, cb: (err: ServiceError | null) => void): void;
      close(): void;
    };
    clients.push(raw);
    const err = await new Promise<ServiceError | null>((resolve) =>
      raw.status(Buffer.from([0x0a, 0xff, 0xff, 0xff]), resolve),
    );
    expect(err?.code).toBe(GrpcStatus.INTERNAL);
    expect(err?.details).toMatch(/deserializ/i);
    expect((await shardClient(0).status()).shard).toBe(0);
  });

  it('pserver grpc - a push-pull of garbage or for an unknown job is refused and the server keeps serving', async () => {
    const Raw = makeGenericClientConstructor(
      {
        pushPull: {
          path: '/tributary.pserver.v1.ParameterServer/PushPull',
          requestStream: true,
          responseStream: true,
          requestSerialize: (b: Buffer) => b,
          requestDeserialize: (b: Buffer) => b,
          responseSerialize: (b: Buffer) => b,
          responseDeserialize: (b: Buffer) => b,
        },
      },
      'Raw',
    );
    const raw = new Raw(addresses[0], credentials.createInsecure()) as unknown as {
      pushPull(): NodeJS.ReadWriteStream & { end(b?: Buffer): void };
      close(): void;
    };
    clients.push(raw);
    const call = raw.pushPull();
    call.on('data', () => undefined);
    const failed = new Promise<ServiceError>((resolve) => call.on('error', resolve));
    call.end(Buffer.from([0x0a, 0xff, 0xff, 0xff]));
    expect((await failed).code).toBe(GrpcStatus.INTERNAL);

    const t = trainer('t', PARAMS, 'job-never-started');
    const err = await t
      .pushPull(
        0,
        1,
        filled(PARAMS, () => 1),
        { waitMs: 50, sameVersion: true },
      )
      .catch((e) => e);
    expect(err).toBeInstanceOf(ShardCallError);
    expect((err as Error).message).toMatch(/job-never-started/);
    expect((await shardClient(0).status()).shard).toBe(0);
  });

  it('pserver grpc - unknown jobs, bad job ids and pulls before init are refused clearly', async () => {
    const c = shardClient(0);
    await expect(c.pullParams('nobody', { waitMs: 10 })).rejects.toMatchObject({ code: GrpcStatus.NOT_FOUND });
    await expect(c.join('Bad Id!', 't')).rejects.toThrow(/job_id/);
    const t = trainer('t');
    await t.beginInit(SPEC);
    await expect(c.pullParams('job-1', { waitMs: 30 })).rejects.toMatchObject({ code: GrpcStatus.DEADLINE_EXCEEDED });
    await expect(
      c.beginInit({
        jobId: 'job-2',
        trainerId: 't',
        specJson: '{"optimizer":{"type":"adadelta"}}',
        params: [],
        shardCount: 2,
      }),
    ).rejects.toThrow(/spec_json.optimizer: unknown optimizer "adadelta"/);
    await expect(c.finishInit('job-1', 'other')).rejects.toBeInstanceOf(PserverError);
  });

  it('pserver grpc - snapshots are announced and can be pulled while they are retained', async () => {
    const t = trainer('t');
    await t.initialize(SPEC, () => filled(PARAMS, () => 1));
    await t.join();
    for (let v = 0; v < 4; v++)
      await t.pushGradients(
        v,
        1,
        filled(PARAMS, () => 0.25),
      );
    expect(snapshots.sort()).toEqual(['job-1/0/2', 'job-1/0/4', 'job-1/1/2', 'job-1/1/4']);
    const snap = await t.pullParams(0, { snapshotVersion: 2 });
    expect(snap.versions).toEqual([2, 2]);
    expect(snap.tensors[0].data[0]).toBe(1 - 2 * LR * 0.25);
    await expect(t.pullParams(0, { snapshotVersion: 3 })).rejects.toThrow(/snapshot of version 3 is not retained/);
    // A snapshot announced by one shard is waited for on a shard that has not reached it yet.
    const ahead = t.pullParams(0, { snapshotVersion: 6, waitMs: 5_000 });
    for (let v = 4; v < 6; v++)
      await t.pushGradients(
        v,
        1,
        filled(PARAMS, () => 0.25),
      );
    expect((await ahead).versions).toEqual([6, 6]);
  });

  it('pserver grpc - a Save outside the data dir (absolute, .., a link out) is refused with INVALID_ARGUMENT, writes nothing, and the shard keeps serving; one inside it is written', async () => {
    const t = trainer('t');
    await t.initialize(SPEC, () => filled(PARAMS, () => 1));
    await t.join();
    await t.pushGradients(
      0,
      1,
      filled(PARAMS, () => 0.25),
    );
    const c = shardClient(0);
    const dataDir = join(dir, 'shard-0');
    const outside = await mkdtemp(join(tmpdir(), 'tributary-save-outside-'));
    try {
      await mkdir(dataDir, { recursive: true });
      await symlink(outside, join(dataDir, 'link-out'));
      for (const path of [
        outside,
        join(outside, 'sub'),
        '../escaped',
        relative(dataDir, outside),
        'link-out',
        'link-out/sub',
      ]) {
        const refusal = await c.save('job-1', path).then(
          () => undefined,
          (err: unknown) => err,
        );
        expect([path, refusal]).toEqual([path, expect.objectContaining({ code: GrpcStatus.INVALID_ARGUMENT })]);
        expect((refusal as Error).message).toContain(
          `path ${JSON.stringify(path)} is outside the shard's data directory`,
        );
      }
      expect(await readdir(outside)).toEqual([]);
      expect(existsSync(join(dir, 'escaped'))).toBe(false);

      // The shard goes on serving: a push-pull steps both shards.
      const outcome = await t.pushPull(
        1,
        1,
        filled(PARAMS, () => 0.25),
        { waitMs: 10_000, sameVersion: true },
      );
      expect(outcome.versions).toEqual([2, 2]);

      const saved = await c.save('job-1', 'kept/here');
      expect(saved.version).toBe(2);
      expect(saved.path.startsWith(join(dataDir, 'kept', 'here') + '/')).toBe(true);
      expect(existsSync(saved.path)).toBe(true);
    } finally {
      await rm(outside, { recursive: true, force: true });
    }
  });

  it('pserver grpc - a restarted shard resumes from its checkpoint', async () => {
    const t = trainer('t');
    await t.initialize(SPEC, () => filled(PARAMS, (_, i) => i));
    await t.join();
    for (let v = 0; v < 3; v++)
      await t.pushGradients(
        v,
        1,
        filled(PARAMS, (_, i) => i / 10),
      );
    const before = await t.pullParams(3);
    const saved = await t.save();
    expect(saved.map((s) => s.version)).toEqual([3, 3]);
    expect(saved[0].path).toMatch(/shard-0\/job-1\/ckpt-000000000003\.bin$/);
    await stopAll();
    await start();
    const again = trainer('t');
    const resumed = await again.pullParams(0);
    expect(resumed.versions).toEqual([3, 3]);
    expect(resumed.tensors).toEqual(before.tensors);
    await again.join();
    await expect(
      again.pushGradients(
        3,
        1,
        filled(PARAMS, () => 0),
      ),
    ).resolves.toMatchObject({ versions: [4, 4] });
  });
});
