import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, connect, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { credentials, status as GrpcStatus, type ServiceError } from '@grpc/grpc-js';
import {
  ShardedPserverClient,
  type FloatWireType,
  type ParamInfo,
  type TensorLike,
  type TransferTypes,
} from '#libs/pserver-client';
import {
  DataType,
  ParameterServerClient,
  decodeBfloat16,
  decodeFloat16,
  encodeBfloat16,
  encodeFloat16,
  tensorParts,
  type PushChunk,
} from '#libs/pserver-protocol';
import { startShards, type RunningShard } from '../test/in-process-shards.js';

// A learning rate of 1/2 makes lr * g exact, so the expected parameters are exact too.
const LR = 0.5;
// Two trainers, so that a step waits for both pushes.
const SYNC_SPEC = JSON.stringify({ optimizer: { type: 'sgd', learningRate: LR }, trainers: { min: 2 } });
const ASYNC_SPEC = JSON.stringify({ optimizer: { type: 'sgd', learningRate: LR }, training: { mode: 'async' } });
const PARAMS: ParamInfo[] = [
  { name: 'dense/kernel', shape: [4, 3] },
  { name: 'dense/bias', shape: [3] },
  { name: 'out/kernel', shape: [3, 2] },
  { name: 'out/bias', shape: [2] },
];
/** Relative rounding error of float16 and bfloat16 (half an ulp of their 11 and 8 bit significands). */
const RELATIVE_ERROR = { float16: 2 ** -11, bfloat16: 2 ** -8 };

const size = (shape: readonly number[]) => shape.reduce((a, b) => a * b, 1);

function filled(params: readonly ParamInfo[], f: (name: string, i: number) => number): TensorLike[] {
  return params.map((p) => ({
    name: p.name,
    shape: p.shape,
    data: Float32Array.from({ length: size(p.shape) }, (_, i) => f(p.name, i)),
  }));
}

/** `values` as they arrive after travelling as `dtype`. */
function rounded(values: Float32Array, dtype: FloatWireType): Float32Array {
  if (dtype === 'float32') return values;
  const half = new Uint16Array(values.length);
  const back = new Float32Array(values.length);
  if (dtype === 'float16') {
    encodeFloat16(values, half);
    decodeFloat16(half, back);
  } else {
    encodeBfloat16(values, half);
    decodeBfloat16(half, back);
  }
  return back;
}

function byName(tensors: readonly TensorLike[]): Map<string, Float32Array> {
  return new Map(tensors.map((t) => [t.name, t.data as Float32Array]));
}

/** A TCP proxy in front of `target` counting the bytes each way: what goes over the wire. */
interface CountingProxy {
  address: string;
  bytes: { up: number; down: number };
  close(): void;
}

async function countingProxy(target: string): Promise<CountingProxy> {
  const [host, port] = [target.slice(0, target.lastIndexOf(':')), Number(target.slice(target.lastIndexOf(':') + 1))];
  const bytes = { up: 0, down: 0 };
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = connect(port, host);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('error', () => undefined);
      s.on('close', () => {
        client.destroy();
        upstream.destroy();
      });
    }
    client.on('data', (b: Buffer) => (bytes.up += b.length));
    upstream.on('data', (b: Buffer) => (bytes.down += b.length));
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    address: `127.0.0.1:${(server.address() as AddressInfo).port}`,
    bytes,
    close: () => {
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}

let dir: string;
let shards: RunningShard[];
let addresses: string[];
const closers: { close(): void }[] = [];

function trainer(
  id: string,
  transfer: Partial<TransferTypes> = {},
  options: { params?: readonly ParamInfo[]; at?: readonly string[] } = {},
): ShardedPserverClient {
  const c = ShardedPserverClient.fromAddresses(options.at ?? addresses, {
    jobId: 'job-1',
    trainerId: id,
    params: options.params ?? PARAMS,
    unavailableRetryMs: 0,
    client: { transfer },
  });
  closers.push(c);
  return c;
}

function rawClient(k: number): ParameterServerClient {
  const raw = new ParameterServerClient(addresses[k], credentials.createInsecure());
  closers.push(raw);
  return raw;
}

/** Streams `chunks` as one PushGradients call; resolves with its error, or null when it was taken. */
function rawPush(k: number, chunks: readonly PushChunk[]): Promise<ServiceError | null> {
  return new Promise((resolve) => {
    const call = rawClient(k).pushGradients((err: ServiceError | null) => resolve(err));
    for (const c of chunks) call.write(c);
    call.end();
  });
}

function pushChunk(tensor: PushChunk['tensor'], pullDtype = DataType.UNSPECIFIED): PushChunk {
  return {
    jobId: 'job-1',
    trainerId: 't',
    version: 0,
    samples: 1,
    tensor,
    pullWaitMs: 1_000,
    pullDtype,
    round: 0,
    last: false,
  };
}

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tributary-transfer-'));
  shards = await startShards(2, { dataDir: dir });
  addresses = shards.map((s) => s.address);
});

afterEach(async () => {
  for (const c of closers.splice(0)) c.close();
  await Promise.all(shards.map((s) => s.stop()));
  await rm(dir, { recursive: true, force: true });
});

describe('pserver transfer types', () => {
  it('transfer - a synchronous step averages a float16 and a bfloat16 push in float32, and pulls round the result', async () => {
    const a = trainer('a', { gradients: 'float16' });
    const b = trainer('b', { gradients: 'bfloat16' });
    const init = filled(PARAMS, (name, i) => Math.cos(i + name.length));
    await a.initialize(SYNC_SPEC, () => init);
    await a.join();
    await b.join();
    // b's gradients lie far beyond float16's range, which bfloat16 keeps.
    const ga = filled(PARAMS, (name, i) => Math.sin(3 * i + name.length) * 100);
    const gb = filled(PARAMS, (name, i) => Math.cos(5 * i + name.length) * 1e6);
    const [pa, pb] = await Promise.all([a.pushGradients(0, 3, ga), b.pushGradients(0, 5, gb)]);
    for (const outcome of [pa, pb]) expect(outcome).toMatchObject({ accepted: [true, true], stale: [] });

    const after = byName((await trainer('reader').pullParams(1)).tensors);
    const [p0, gA, gB] = [byName(init), byName(ga), byName(gb)];
    for (const { name } of PARAMS) {
      const ra = rounded(gA.get(name)!, 'float16');
      const rb = rounded(gB.get(name)!, 'bfloat16');
      // The shard decoded each push and averaged in float32: exactly the rounded gradients' step.
      const expected = p0.get(name)!.map((p, i) => p - LR * Math.fround((3 * ra[i] + 5 * rb[i]) / 8));
      expect(after.get(name)).toEqual(expected);
      // And within half-precision rounding of the step float32 gradients would have taken.
      after.get(name)!.forEach((v, i) => {
        const [x, y] = [Math.abs(gA.get(name)![i]), Math.abs(gB.get(name)![i])];
        const exact = p0.get(name)![i] - (LR * (3 * gA.get(name)![i] + 5 * gB.get(name)![i])) / 8;
        // The halves' rounding of each gradient, plus float32's of the average and of the result.
        const bound =
          (LR * (3 * x * RELATIVE_ERROR.float16 + 5 * y * RELATIVE_ERROR.bfloat16)) / 8 +
          ((LR * (3 * x + 5 * y)) / 8 + Math.abs(exact)) * 2 ** -23;
        expect(Math.abs(v - exact)).toBeLessThanOrEqual(bound);
      });
    }

    // Parameters sent back in 16 bits are the float32 parameters rounded, pulled or push-pulled
    // (a and b again, now with other clients).
    const half = await trainer('c', { params: 'float16' }).pullParams(1);
    for (const t of half.tensors) expect(t.data).toEqual(rounded(after.get(t.name)!, 'float16'));
    const both = [
      trainer('a', { gradients: 'bfloat16', params: 'bfloat16' }),
      trainer('b', { gradients: 'float16', params: 'bfloat16' }),
    ];
    const replies = await Promise.all(both.map((t) => t.pushPull(1, 1, ga, { waitMs: 10_000, sameVersion: true })));
    const step2 = byName((await a.pullParams(2)).tensors);
    for (const reply of replies) {
      expect(reply.params?.versions).toEqual([2, 2]);
      for (const t of reply.params!.tensors) expect(t.data).toEqual(rounded(step2.get(t.name)!, 'bfloat16'));
    }
  });

  it('transfer - float16 and bfloat16 take half the bytes of float32 on the wire, pushed and pulled', async () => {
    // 100,000 parameters, as in the examples' MLP; one shard owns them, the other nothing.
    const params: ParamInfo[] = [{ name: 'dense/kernel', shape: [250, 400] }];
    await trainer('init', {}, { params }).initialize(ASYNC_SPEC, () => filled(params, (_, i) => Math.sin(i)));
    const grad = filled(params, (_, i) => Math.cos(i) / 100);
    const measure = async (dtype: FloatWireType) => {
      const proxies = await Promise.all(addresses.map(countingProxy));
      closers.push(...proxies);
      const t = trainer(dtype, { gradients: dtype, params: dtype }, { params, at: proxies.map((p) => p.address) });
      const total = (side: 'up' | 'down') => proxies.reduce((n, p) => n + p.bytes[side], 0);
      const reset = () => proxies.forEach((p) => Object.assign(p.bytes, { up: 0, down: 0 }));
      // The connections are set up first, so only the calls themselves are counted.
      const { version } = await t.pullParams(0, { sameVersion: false });
      reset();
      await t.pushGradients(version, 1, grad);
      const pushed = total('up');
      reset();
      await t.pullParams(version + 1, { sameVersion: false });
      return { pushed, pulled: total('down') };
    };
    const full = await measure('float32');
    expect(full.pushed).toBeGreaterThan(400_000);
    expect(full.pulled).toBeGreaterThan(400_000);
    for (const dtype of ['float16', 'bfloat16'] as const) {
      const half = await measure(dtype);
      expect(half.pushed / full.pushed).toBeGreaterThan(0.49);
      expect(half.pushed / full.pushed).toBeLessThan(0.51);
      expect(half.pulled / full.pulled).toBeGreaterThan(0.49);
      expect(half.pulled / full.pulled).toBeLessThan(0.51);
    }
  });

  it('transfer - tensors of another dtype, parts that change dtype and bad requested types are refused by name; the shard keeps serving', async () => {
    const t = trainer('t');
    await t.initialize(SYNC_SPEC, () => filled(PARAMS, () => 1));
    const owner = t.shardMap.shardOf('dense/kernel');
    const kernel = { name: 'dense/kernel', shape: [4, 3], data: new Float32Array(12).fill(0.5) };
    const part = [...tensorParts(kernel)][0];

    const ints = await rawPush(owner, [pushChunk({ ...part, dtype: DataType.INT32 })]);
    expect(ints?.code).toBe(GrpcStatus.INVALID_ARGUMENT);
    expect(ints?.details).toMatch(/gradient "dense\/kernel": expected float32, float16 or bfloat16, got int32/);

    const unknown = await rawPush(owner, [pushChunk({ ...part, dtype: 42 as DataType })]);
    expect(unknown?.code).toBe(GrpcStatus.INVALID_ARGUMENT);
    expect(unknown?.details).toMatch(/tensor "dense\/kernel": unknown dtype 42/);

    // A float16 tensor whose second part claims to be float32.
    const [first, second] = [...tensorParts(kernel, 12, DataType.FLOAT16)];
    const mixed = await rawPush(owner, [pushChunk(first), pushChunk({ ...second, dtype: DataType.FLOAT32 })]);
    expect(mixed?.code).toBe(GrpcStatus.INVALID_ARGUMENT);
    expect(mixed?.details).toMatch(
      /tensor "dense\/kernel": part at byte 12 says float32 \[4, 3\], earlier parts said float16 \[4, 3\]/,
    );

    const badPull = await new Promise<ServiceError>((resolve) => {
      const call = rawClient(owner).pullParams({
        jobId: 'job-1',
        minVersion: 0,
        waitMs: 1_000,
        trainerId: 't',
        dtype: DataType.INT32,
      });
      call.on('data', () => undefined);
      call.on('error', resolve);
    });
    expect(badPull.code).toBe(GrpcStatus.INVALID_ARGUMENT);
    expect(badPull.details).toMatch(/dtype: expected float32, float16 or bfloat16, got int32/);

    const badPushPull = await new Promise<ServiceError>((resolve) => {
      const call = rawClient(owner).pushPull();
      call.on('data', () => undefined);
      call.on('error', resolve);
      call.write(pushChunk(part, DataType.FLOAT64));
      call.end();
    });
    expect(badPushPull.code).toBe(GrpcStatus.INVALID_ARGUMENT);
    expect(badPushPull.details).toMatch(/pull_dtype: expected float32, float16 or bfloat16, got float64/);

    // Nothing was taken, and the shard serves the next good push.
    expect((await t.status()).map((s) => s.jobs[0])).toMatchObject([
      { version: 0, pendingPushes: 0 },
      { version: 0, pendingPushes: 0 },
    ]);
    const half = trainer('h', { gradients: 'float16' });
    await half.join();
    await expect(
      half.pushGradients(
        0,
        1,
        filled(PARAMS, () => 0.5),
      ),
    ).resolves.toMatchObject({
      versions: [1, 1],
    });
  });
});
