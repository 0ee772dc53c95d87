/**
 * `exchange`: a push and the pull of the parameters it produced (one push-pull, as a trainer's
 * step does), for a 4 MiB model through one pserver shard in another process, against the same
 * bytes sent and echoed back over a plain loopback TCP socket. Figures are MB/s of both
 * directions together.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SERVICE_NODE_FLAGS } from '#libs/local-cluster';
import { ShardedPserverClient, type ParamInfo, type TensorLike } from '#libs/pserver-client';
import { benchResult, round, type BenchResult } from '../bench-result.js';
import { ROOT } from '../cluster/bench-cluster.js';

/** The model: 1M float32 values in four tensors (4 MiB). */
const PARAMS: ParamInfo[] = [
  { name: 'a', shape: [512, 1024] },
  { name: 'b', shape: [256, 1024] },
  { name: 'c', shape: [255, 1024] },
  { name: 'd', shape: [1024] },
];
const MODEL_BYTES = 4 * PARAMS.reduce((n, p) => n + p.shape.reduce((a, b) => a * b, 1), 0);
const MEASURE_MS = 5_000;
const WARM_UP_ROUNDS = 5;
const TARGET_RATIO = 0.5;
const SPEC = JSON.stringify({ optimizer: { type: 'sgd', learningRate: 1e-6 }, training: { mode: 'sync' } });

function tensors(fill: number): TensorLike[] {
  return PARAMS.map((p) => ({
    name: p.name,
    shape: p.shape,
    data: new Float32Array(p.shape.reduce((a, b) => a * b, 1)).fill(fill),
  }));
}

/** MB/s of push-pulls (both directions counted) through a shard in its own process. */
async function pserverMegabytesPerSecond(): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'tributary-bench-exchange-'));
  const child = spawn(
    process.execPath,
    [...SERVICE_NODE_FLAGS, join(ROOT, 'dist', 'bench', 'exchange', 'shard-server.js'), dir],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  try {
    const address = await new Promise<string>((resolve, reject) => {
      let out = '';
      child.stdout.on('data', (d: Buffer) => {
        out += d.toString();
        const found = /listening (\S+)/.exec(out);
        if (found) resolve(found[1]!);
      });
      child.once('exit', (code) => reject(new Error(`the shard process exited with ${code}`)));
    });
    const client = ShardedPserverClient.fromAddresses([address], { jobId: 'exchange', trainerId: 't', params: PARAMS });
    try {
      await client.initialize(SPEC, () => tensors(1));
      await client.join();
      const grad = tensors(0.5);
      let version = 0;
      const round = async () => {
        const outcome = await client.pushPull(version, 64, grad, { waitMs: 10_000, sameVersion: true });
        if (!outcome.params) throw new Error('push-pull brought no parameters back');
        version = outcome.params.version;
      };
      for (let i = 0; i < WARM_UP_ROUNDS; i++) await round();
      let rounds = 0;
      const start = performance.now();
      while (performance.now() - start < MEASURE_MS) {
        await round();
        rounds += 1;
      }
      return (2 * MODEL_BYTES * rounds) / ((performance.now() - start) / 1000) / 1e6;
    } finally {
      client.close();
    }
  } finally {
    child.kill('SIGTERM');
    rmSync(dir, { recursive: true, force: true });
  }
}

/** MB/s of the same bytes written to a loopback socket and echoed back by another process. */
async function tcpMegabytesPerSecond(): Promise<number> {
  const echo = spawn(
    process.execPath,
    [
      '-e',
      `const s = require('node:net').createServer((c) => c.pipe(c)); s.listen(0, '127.0.0.1', () => console.log('listening ' + s.address().port));`,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  try {
    const port = await new Promise<number>((resolve) => {
      echo.stdout.on('data', (d: Buffer) => {
        const found = /listening (\d+)/.exec(d.toString());
        if (found) resolve(Number(found[1]));
      });
    });
    const socket: Socket = connect(port, '127.0.0.1');
    await new Promise((r) => socket.once('connect', r));
    const payload = Buffer.alloc(MODEL_BYTES, 7);
    let pending = 0;
    let done: (() => void) | undefined;
    socket.on('data', (d: Buffer) => {
      pending -= d.length;
      if (pending <= 0) done?.();
    });
    const roundTrip = () =>
      new Promise<void>((resolve) => {
        pending = MODEL_BYTES;
        done = resolve;
        socket.write(payload);
      });
    for (let i = 0; i < WARM_UP_ROUNDS; i++) await roundTrip();
    let rounds = 0;
    const start = performance.now();
    while (performance.now() - start < MEASURE_MS) {
      await roundTrip();
      rounds += 1;
    }
    const rate = (2 * MODEL_BYTES * rounds) / ((performance.now() - start) / 1000) / 1e6;
    socket.destroy();
    return rate;
  } finally {
    echo.kill('SIGTERM');
  }
}

export async function runExchangeBench(say: (line: string) => void): Promise<BenchResult[]> {
  say('raw loopback TCP echo of 4 MiB');
  const tcp = await tcpMegabytesPerSecond();
  say(`raw TCP: ${Math.round(tcp)} MB/s; now push-pull of a 4 MiB model through one pserver`);
  const pserver = await pserverMegabytesPerSecond();
  return [
    benchResult({
      name: 'exchange: push + pull of 4 MiB through a pserver vs raw loopback TCP',
      figure: round(pserver),
      unit: 'MB/s',
      baseline: round(tcp),
      target: TARGET_RATIO,
    }),
  ];
}
