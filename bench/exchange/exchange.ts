/**
 * `exchange`: a push and the pull of the parameters it produced (one push-pull, as a trainer's
 * step does), for a 4 MiB model through one pserver shard in another process, against the same
 * bytes sent and echoed back over a plain loopback TCP socket. Figures are MB/s of both
 * directions together: the median of windows in which the two take turns.
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
/** Windows each side is measured in, in turn, and how long each lasts. */
const WINDOWS = 5;
const WINDOW_MS = 2_000;
const TARGET_RATIO = 0.5;
const SPEC = JSON.stringify({ optimizer: { type: 'sgd', learningRate: 1e-6 }, training: { mode: 'sync' } });

function tensors(fill: number): TensorLike[] {
  return PARAMS.map((p) => ({
    name: p.name,
    shape: p.shape,
    data: new Float32Array(p.shape.reduce((a, b) => a * b, 1)).fill(fill),
  }));
}

/** A link under test: one round moves `MODEL_BYTES` each way; `close` ends it. */
interface Link {
  round(): Promise<void>;
  close(): void;
}

/** Push-pulls (a push and the parameters it produced) through a shard in its own process. */
async function openPserverLink(): Promise<Link> {
  const dir = mkdtempSync(join(tmpdir(), 'tributary-bench-exchange-'));
  const child = spawn(
    process.execPath,
    [...SERVICE_NODE_FLAGS, join(ROOT, 'dist', 'bench', 'exchange', 'shard-server.js'), dir],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const stop = () => {
    child.kill('SIGTERM');
    rmSync(dir, { recursive: true, force: true });
  };
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
    } catch (err) {
      client.close();
      throw err;
    }
    const grad = tensors(0.5);
    let version = 0;
    return {
      round: async () => {
        const outcome = await client.pushPull(version, 64, grad, { waitMs: 10_000, sameVersion: true });
        if (!outcome.params) throw new Error('push-pull brought no parameters back');
        version = outcome.params.version;
      },
      close: () => {
        client.close();
        stop();
      },
    };
  } catch (err) {
    stop();
    throw err;
  }
}

/** The same bytes written to a loopback socket and echoed back by another process. */
async function openTcpLink(): Promise<Link> {
  const echo = spawn(
    process.execPath,
    [
      '-e',
      `const s = require('node:net').createServer((c) => c.pipe(c)); s.listen(0, '127.0.0.1', () => console.log('listening ' + s.address().port));`,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  try {
    const port = await new Promise<number>((resolve, reject) => {
      echo.stdout.on('data', (d: Buffer) => {
        const found = /listening (\d+)/.exec(d.toString());
        if (found) resolve(Number(found[1]));
      });
      echo.once('exit', (code) => reject(new Error(`the echo process exited with ${code}`)));
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
    return {
      round: () =>
        new Promise<void>((resolve) => {
          pending = MODEL_BYTES;
          done = resolve;
          socket.write(payload);
        }),
      close: () => {
        socket.destroy();
        echo.kill('SIGTERM');
      },
    };
  } catch (err) {
    echo.kill('SIGTERM');
    throw err;
  }
}

/** MB/s (both directions counted) of a link's rounds over one window. */
async function megabytesPerSecond(link: Link, windowMs: number): Promise<number> {
  let rounds = 0;
  const start = performance.now();
  while (performance.now() - start < windowMs) {
    await link.round();
    rounds += 1;
  }
  return (2 * MODEL_BYTES * rounds) / ((performance.now() - start) / 1000) / 1e6;
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

export async function runExchangeBench(say: (line: string) => void): Promise<BenchResult[]> {
  say(`raw loopback TCP echo vs push-pull through one pserver, 4 MiB each way, ${WINDOWS} windows each`);
  const tcp = await openTcpLink();
  try {
    const pserver = await openPserverLink();
    try {
      // Both speed up over their first seconds (the echo and the shard compile, the sockets'
      // buffers grow): a first window of each is not counted.
      for (const link of [tcp, pserver]) await megabytesPerSecond(link, WINDOW_MS);
      // The two take turns, window by window, so that both see the machine as it is at the time.
      const rates = { tcp: [] as number[], pserver: [] as number[] };
      for (let w = 0; w < WINDOWS; w++) {
        const order = w % 2 === 0 ? (['tcp', 'pserver'] as const) : (['pserver', 'tcp'] as const);
        for (const which of order)
          rates[which].push(await megabytesPerSecond(which === 'tcp' ? tcp : pserver, WINDOW_MS));
        say(
          `window ${w + 1}: raw TCP ${Math.round(rates.tcp[w]!)} MB/s, pserver ${Math.round(rates.pserver[w]!)} MB/s`,
        );
      }
      return [
        benchResult({
          name: 'exchange: push + pull of 4 MiB through a pserver vs raw loopback TCP',
          figure: round(median(rates.pserver)),
          unit: 'MB/s',
          baseline: round(median(rates.tcp)),
          target: TARGET_RATIO,
          detail: `medians of ${WINDOWS} windows of ${WINDOW_MS / 1000} s each, taken in turn`,
        }),
      ];
    } finally {
      pserver.close();
    }
  } finally {
    tcp.close();
  }
}
