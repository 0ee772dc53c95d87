/**
 * `exchange`: a push and the pull of the parameters it produced (one push-pull, as a trainer's
 * step does), for a 4 MiB model through one pserver shard in another process, against the same
 * bytes sent and echoed back over a plain loopback TCP socket. Figures are MB/s of both
 * directions together: the median of windows in which the links take turns.
 *
 * Two more links show how much of the gap lies in the transports under the pserver: the same bytes
 * as one request and its answer over plain `node:http2`, and as raw messages on one gRPC stream
 * (see `bare-server.ts`), both with the pserver's windows.
 */
import { credentials, makeGenericClientConstructor } from '@grpc/grpc-js';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect as connectHttp2 } from 'node:http2';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SERVICE_NODE_FLAGS } from '#libs/local-cluster';
import { CLIENT_CHANNEL_OPTIONS, FLOW_CONTROL_WINDOW_BYTES } from '#libs/pserver-protocol';
import { ShardedPserverClient, type ParamInfo, type TensorLike } from '#libs/pserver-client';
import { benchResult, median, round, type BenchResult } from '../bench-result.js';
import { ROOT } from '../cluster/bench-cluster.js';
import { BARE_STEPS_SERVICE, roundMessages } from './bare-steps.js';

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

/**
 * Starts `node ARGS` and waits for its `listening <address>` line.
 *
 * @throws Error naming `what` when the process exits first (it is then gone).
 */
async function startListening(what: string, args: string[]): Promise<{ child: ChildProcess; address: string }> {
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  const address = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const found = /listening (\S+)/.exec(out);
      if (found) resolve(found[1]!);
    });
    child.once('exit', (code) => reject(new Error(`the ${what} process exited with ${code}`)));
  });
  return { child, address };
}

/** Push-pulls (a push and the parameters it produced) through a shard in its own process. */
async function openPserverLink(): Promise<Link> {
  const dir = mkdtempSync(join(tmpdir(), 'tributary-bench-exchange-'));
  let child: ChildProcess | undefined;
  const stop = () => {
    child?.kill('SIGTERM');
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const started = await startListening('shard', [
      ...SERVICE_NODE_FLAGS,
      join(ROOT, 'dist', 'bench', 'exchange', 'shard-server.js'),
      dir,
    ]);
    child = started.child;
    const address = started.address;
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
  const { child: echo, address: port } = await startListening('echo', [
    '-e',
    `const s = require('node:net').createServer((c) => c.pipe(c)); s.listen(0, '127.0.0.1', () => console.log('listening ' + s.address().port));`,
  ]);
  try {
    const socket: Socket = connect(Number(port), '127.0.0.1');
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

/** Starts `bare-server.js` serving `kind` for rounds of the model's size. */
function startBareServer(kind: 'http2' | 'grpc'): Promise<{ child: ChildProcess; address: string }> {
  return startListening(`bare ${kind} server`, [
    join(ROOT, 'dist', 'bench', 'exchange', 'bare-server.js'),
    kind,
    String(MODEL_BYTES),
  ]);
}

/**
 * The same bytes as one request and its answer over plain `node:http2` (no gRPC, no protobuf),
 * to a server that answers once the whole request is in, both ends with the pserver's windows.
 */
async function openHttp2Link(): Promise<Link> {
  const { child, address } = await startBareServer('http2');
  try {
    const session = connectHttp2(`http://${address}`, { settings: { initialWindowSize: FLOW_CONTROL_WINDOW_BYTES } });
    await new Promise<void>((resolve, reject) => {
      session.once('connect', () => resolve());
      session.once('error', reject);
    });
    session.setLocalWindowSize(FLOW_CONTROL_WINDOW_BYTES);
    const payload = Buffer.alloc(MODEL_BYTES, 7);
    return {
      round: () =>
        new Promise<void>((resolve, reject) => {
          const request = session.request({ ':method': 'POST', ':path': '/' });
          let received = 0;
          request.on('data', (d: Buffer) => {
            received += d.length;
          });
          request.once('error', reject);
          request.once('end', () => (received === MODEL_BYTES ? resolve() : reject(shortAnswer('HTTP/2', received))));
          request.end(payload);
        }),
      close: () => {
        session.destroy();
        child.kill('SIGTERM');
      },
    };
  } catch (err) {
    child.kill('SIGTERM');
    throw err;
  }
}

/**
 * The same bytes as 1 MiB messages of raw bytes (no protobuf, no pserver) on one long-lived gRPC
 * stream, answered with as many once the round is in, with the pserver client's options.
 */
async function openGrpcLink(): Promise<Link> {
  const { child, address } = await startBareServer('grpc');
  const Client = makeGenericClientConstructor(BARE_STEPS_SERVICE, 'Bare');
  const client = new Client(address, credentials.createInsecure(), CLIENT_CHANNEL_OPTIONS);
  const call = client.makeBidiStreamRequest(
    BARE_STEPS_SERVICE.steps.path,
    BARE_STEPS_SERVICE.steps.requestSerialize,
    BARE_STEPS_SERVICE.steps.responseDeserialize,
  );
  const payload = roundMessages(MODEL_BYTES);
  let received = 0;
  let waiting: { resolve: () => void; reject: (err: Error) => void } | undefined;
  call.on('data', (message: Buffer) => {
    received += message.length;
    if (received < MODEL_BYTES) return;
    received = 0;
    waiting?.resolve();
  });
  call.on('error', (err: Error) => waiting?.reject(err));
  return {
    round: () =>
      new Promise<void>((resolve, reject) => {
        waiting = { resolve, reject };
        for (const m of payload) call.write(m);
      }),
    close: () => {
      call.cancel();
      client.close();
      child.kill('SIGTERM');
    },
  };
}

function shortAnswer(link: string, received: number): Error {
  return new Error(`the ${link} server answered ${received} bytes, expected ${MODEL_BYTES}`);
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

/** The links, in the order they are opened; the turns rotate through them. */
const LINKS = [
  { key: 'tcp', label: 'raw TCP', open: openTcpLink },
  { key: 'http2', label: 'HTTP/2 alone', open: openHttp2Link },
  { key: 'grpc', label: 'gRPC alone', open: openGrpcLink },
  { key: 'pserver', label: 'pserver', open: openPserverLink },
] as const;
type LinkKey = (typeof LINKS)[number]['key'];

export async function runExchangeBench(say: (line: string) => void): Promise<BenchResult[]> {
  say(
    `raw loopback TCP echo vs push-pull through one pserver (and plain HTTP/2 and gRPC between them), ` +
      `4 MiB each way, ${WINDOWS} windows each`,
  );
  const open: { key: LinkKey; label: string; link: Link }[] = [];
  try {
    for (const { key, label, open: openLink } of LINKS) open.push({ key, label, link: await openLink() });
    // Each speeds up over its first seconds (the servers compile, the sockets' buffers grow): a
    // first window of each is not counted.
    for (const { link } of open) await megabytesPerSecond(link, WINDOW_MS);
    // The links take turns, window by window, each window starting with the next one, so that
    // all see the machine as it is at the time.
    const rates = Object.fromEntries(LINKS.map(({ key }) => [key, [] as number[]])) as Record<LinkKey, number[]>;
    for (let w = 0; w < WINDOWS; w++) {
      for (let k = 0; k < open.length; k++) {
        const { key, link } = open[(w + k) % open.length]!;
        rates[key].push(await megabytesPerSecond(link, WINDOW_MS));
      }
      say(`window ${w + 1}: ` + open.map(({ key, label }) => `${label} ${Math.round(rates[key][w]!)} MB/s`).join(', '));
    }
    const [tcp, http2, grpc, pserver] = [rates.tcp, rates.http2, rates.grpc, rates.pserver].map(median) as [
      number,
      number,
      number,
      number,
    ];
    return [
      benchResult({
        name: 'exchange: push + pull of 4 MiB through a pserver vs raw loopback TCP',
        figure: round(pserver),
        unit: 'MB/s',
        baseline: round(tcp),
        target: TARGET_RATIO,
        detail:
          `medians of ${WINDOWS} windows of ${WINDOW_MS / 1000} s each, taken in turn; ` +
          `the transports alone, in MB/s and as a share of raw TCP: HTTP/2 (one request and its answer) ` +
          `${Math.round(http2)} = ${(http2 / tcp).toFixed(2)}, gRPC (raw bytes on one stream) ${Math.round(grpc)} = ` +
          `${(grpc / tcp).toFixed(2)}; the pserver did ${(pserver / grpc).toFixed(2)} of gRPC alone`,
      }),
    ];
  } finally {
    for (const { link } of open) link.close();
  }
}
