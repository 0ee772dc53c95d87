/**
 * The transports under the pserver alone, for `exchange`: a server on a free loopback port that
 * reads a round's bytes whole, then answers with as many, as a push-pull does (the pserver steps
 * only once the whole push is in). With `http2`, each round is one plain `node:http2` request;
 * with `grpc`, a round is the bytes of a model sent as 1 MiB messages of raw bytes (no protobuf)
 * on one long-lived gRPC stream, answered with as many messages, as a trainer's `Steps` stream
 * carries them. Both open the pserver's windows. Prints `listening <address>` once serving;
 * stops on SIGTERM.
 *
 *   node bare-server.js http2|grpc ROUND_BYTES
 */
import { Server, ServerCredentials, type ServerDuplexStream } from '@grpc/grpc-js';
import { createServer } from 'node:http2';
import { FLOW_CONTROL_WINDOW_BYTES, SERVER_CHANNEL_OPTIONS } from '#libs/pserver-protocol';
import { widenReceiveWindows } from '../../services/pserver/src/grpc-server.js';
import { BARE_STEPS_SERVICE, roundMessages } from './bare-steps.js';

async function serveHttp2(roundBytes: number): Promise<() => void> {
  const reply = Buffer.alloc(roundBytes, 7);
  const server = createServer({ settings: { initialWindowSize: FLOW_CONTROL_WINDOW_BYTES } });
  server.on('session', (session) => session.setLocalWindowSize(FLOW_CONTROL_WINDOW_BYTES));
  server.on('stream', (stream) => {
    stream.resume();
    stream.on('end', () => {
      stream.respond({ ':status': 200 });
      stream.end(reply);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  process.stdout.write(`listening 127.0.0.1:${typeof address === 'object' && address ? address.port : address}\n`);
  return () => server.close();
}

async function serveGrpc(roundBytes: number): Promise<() => void> {
  const reply = roundMessages(roundBytes);
  const server = new Server(SERVER_CHANNEL_OPTIONS);
  server.addService(BARE_STEPS_SERVICE, {
    steps: (call: ServerDuplexStream<Buffer, Buffer>) => {
      let received = 0;
      call.on('data', (message: Buffer) => {
        received += message.length;
        if (received < roundBytes) return;
        received = 0;
        for (const m of reply) call.write(m);
      });
      call.on('end', () => call.end());
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  widenReceiveWindows(server, FLOW_CONTROL_WINDOW_BYTES);
  process.stdout.write(`listening 127.0.0.1:${port}\n`);
  return () => server.forceShutdown();
}

const [kind, size] = process.argv.slice(2);
const roundBytes = Number(size);
if ((kind !== 'http2' && kind !== 'grpc') || !Number.isSafeInteger(roundBytes) || roundBytes <= 0) {
  process.stderr.write(`usage: bare-server.js http2|grpc ROUND_BYTES (got ${process.argv.slice(2).join(' ')})\n`);
  process.exit(2);
}
const stop = await (kind === 'http2' ? serveHttp2 : serveGrpc)(roundBytes);
process.on('SIGTERM', () => {
  stop();
  process.exit(0);
});
