import { once, type EventEmitter } from 'node:events';
import type { ServerHttp2Session } from 'node:http2';
import { finished, type Writable } from 'node:stream';
import {
  Metadata,
  Server,
  status as GrpcStatus,
  type ServerDuplexStream,
  type ServerErrorResponse,
  type ServerReadableStream,
  type ServerWritableStream,
  type sendUnaryData,
} from '@grpc/grpc-js';
import {
  EMPTY_PUSH_PULL_REPLY,
  ERROR_REASON_METADATA_KEY,
  FLOW_CONTROL_WINDOW_BYTES,
  TENSOR_CHUNK_SIZE_BYTES,
  MalformedTensorError,
  ParameterServerService,
  SERVER_CHANNEL_OPTIONS,
  SHARD_VERSION_METADATA_KEY,
  TensorAssembler,
  serverCredentials,
  tensorParts,
  typedArrayOf,
  type DataType,
  type InitChunk,
  type NamedTensor,
  type ParameterServerServer,
  type PullChunk,
  type PserverTls,
  type PullRequest,
  type PushChunk,
  type PushPullReply,
  type PushReply,
  type Tensor,
  type TensorArray,
} from '#libs/pserver-protocol';
import { HealthService, HealthStatus } from '#libs/grpc-health';
import type { LineLogger } from '#libs/logging';
import { GradientVersionError, InvalidRequestError, ShardError, type ShardErrorReason } from './errors.js';
import type { JobShard } from './job-shard.js';
import type { ParameterShard } from './parameter-shard.js';
import { PushReceiver, sameHeader, type TakenPush } from './push-receiver.js';
import { requestedParamsType } from './push-validation.js';

/** How long `stop` lets calls in flight finish before cutting them off. */
export const GRPC_SHUTDOWN_GRACE_MS = 5_000;

const REASON_CODES: Record<ShardErrorReason, GrpcStatus> = {
  'stale-gradient': GrpcStatus.FAILED_PRECONDITION,
  'invalid-tensor': GrpcStatus.INVALID_ARGUMENT,
  'invalid-request': GrpcStatus.INVALID_ARGUMENT,
  'unknown-job': GrpcStatus.NOT_FOUND,
  'not-initialized': GrpcStatus.UNAVAILABLE,
  'init-lease': GrpcStatus.FAILED_PRECONDITION,
  'already-initialized': GrpcStatus.ALREADY_EXISTS,
  'incomplete-init': GrpcStatus.FAILED_PRECONDITION,
  'snapshot-not-retained': GrpcStatus.NOT_FOUND,
  'wait-timeout': GrpcStatus.DEADLINE_EXCEEDED,
  closing: GrpcStatus.UNAVAILABLE,
  checkpoint: GrpcStatus.DATA_LOSS,
};

/** How a handler's error is refused: the gRPC status and the metadata a client maps it by. */
interface Refusal {
  code: GrpcStatus;
  details: string;
  /** `tributary-error-reason`; empty for an unexpected error. */
  reason: string;
  /** `tributary-shard-version` of a version refusal. */
  shardVersion?: number;
}

/** Settings of a `PserverGrpcServer`. */
export interface PserverGrpcServerOptions {
  host: string;
  /** 0 picks a free port. */
  port: number;
  logger?: LineLogger;
  /** Tensor bytes per streamed message in pulls. Default `TENSOR_CHUNK_SIZE_BYTES`. */
  maxChunkBytes?: number;
  /** TLS with the pserver's certificate; mutual TLS when it has a CA. Default plain text. */
  tls?: PserverTls;
}

/** The names the pserver's gRPC health service answers for: the whole server and its service. */
export const PSERVER_HEALTH_SERVICES = ['', 'tributary.pserver.v1.ParameterServer'] as const;

/**
 * The `ParameterServer` gRPC service over a `ParameterShard`. Refusals become gRPC errors with
 * the status code of their reason, the reason in `tributary-error-reason` and, for a version
 * refusal, the shard's version in `tributary-shard-version`; nothing else escapes a handler.
 * A refused round of a `Steps` stream carries the same in its reply and the stream goes on.
 * Beside it, the standard health service (`grpc.health.v1.Health`) says SERVING from `start`
 * until `stop`, NOT_SERVING otherwise.
 */
export class PserverGrpcServer {
  private readonly server = new Server(SERVER_CHANNEL_OPTIONS);
  private readonly logger?: LineLogger;
  private readonly maxChunkBytes: number;
  private bound?: { host: string; port: number };
  /** Set by `stop`: Steps streams end between rounds. */
  private stopping = false;
  /** Ends each Steps stream that is waiting for its next round. */
  private readonly idleStepStreams = new Set<() => void>();
  /** The serving status the gRPC health service answers. */
  readonly health = new HealthStatus();

  constructor(
    private readonly shard: ParameterShard,
    private readonly options: PserverGrpcServerOptions,
  ) {
    this.logger = options.logger;
    this.maxChunkBytes = options.maxChunkBytes ?? TENSOR_CHUNK_SIZE_BYTES;
    this.server.addService(ParameterServerService, this.handlers());
    this.server.addService(HealthService, this.health.handlers());
    this.setHealth('NOT_SERVING');
  }

  /** Binds and starts serving; resolves with the address actually bound. */
  async start(): Promise<{ host: string; port: number; address: string }> {
    const { host } = this.options;
    const target = host.includes(':') ? `[${host}]:${this.options.port}` : `${host}:${this.options.port}`;
    const port = await new Promise<number>((resolve, reject) =>
      this.server.bindAsync(target, serverCredentials(this.options.tls), (err, p) => (err ? reject(err) : resolve(p))),
    );
    widenReceiveWindows(this.server, FLOW_CONTROL_WINDOW_BYTES);
    this.bound = { host, port };
    this.setHealth('SERVING');
    return { host, port, address: `${host.includes(':') ? `[${host}]` : host}:${port}` };
  }

  /** The bound address, once started. */
  get address(): string | undefined {
    return this.bound ? `${this.bound.host}:${this.bound.port}` : undefined;
  }

  /** Stops accepting calls, lets calls in flight finish for up to `graceMs`, then cuts them. */
  async stop(graceMs = GRPC_SHUTDOWN_GRACE_MS): Promise<void> {
    this.setHealth('NOT_SERVING');
    this.health.endWatches();
    this.stopping = true;
    for (const end of this.idleStepStreams) end();
    await new Promise<void>((resolve) => {
      const force = setTimeout(() => {
        this.server.forceShutdown();
        resolve();
      }, graceMs);
      this.server.tryShutdown(() => {
        clearTimeout(force);
        resolve();
      });
    });
  }

  /** True between `start` and `stop`. */
  get serving(): boolean {
    return this.health.get('') === 'SERVING';
  }

  private setHealth(status: 'SERVING' | 'NOT_SERVING'): void {
    for (const service of PSERVER_HEALTH_SERVICES) this.health.set(service, status);
  }

  private handlers(): ParameterServerServer {
    return {
      beginInit: this.unary('BeginInit', (req) =>
        this.shard.beginInit({
          jobId: req.jobId,
          trainerId: req.trainerId,
          specJson: req.specJson,
          params: req.params,
          shardCount: req.shardCount,
        }),
      ),
      initParams: (call, callback) => void this.initParams(call, callback),
      finishInit: this.unary('FinishInit', async (req) => ({
        version: await this.shard.finishInit(req.jobId, req.trainerId),
      })),
      join: this.unary('Join', async (req) => {
        const job = await this.shard.job(req.jobId);
        const { version, countedFrom } = job.join(req.trainerId, req.countedFromAtLeast);
        return { version, countedFromVersion: countedFrom };
      }),
      leave: this.unary('Leave', async (req) => {
        (await this.shard.job(req.jobId)).leave(req.trainerId);
        return {};
      }),
      pushGradients: (call, callback) => void this.pushGradients(call, callback),
      pullParams: (call) => void this.pullParams(call),
      pushPull: (call) => void this.pushPull(call),
      steps: (call) => void this.steps(call),
      save: this.unary('Save', (req) => this.shard.save(req.jobId, req.path || undefined)),
      status: this.unary('Status', async (req) => {
        const jobs = req.jobId
          ? [await this.shard.job(req.jobId)]
          : await Promise.all(this.shard.jobIds().map((id) => this.shard.job(id)));
        return { shard: this.shard.shard, jobs: jobs.map((j) => j.status()) };
      }),
    };
  }

  private unary<Req extends object, Res>(
    method: string,
    fn: (req: Req) => Res | Promise<Res>,
  ): (call: { request: Req }, callback: sendUnaryData<Res>) => void {
    return (call, callback) => {
      Promise.resolve()
        .then(() => fn(call.request))
        .then(
          (res) => callback(null, res),
          (err: unknown) => callback(this.toServiceError(err, method)),
        );
    };
  }

  private async initParams(
    call: ServerReadableStream<InitChunk, { tensors: number }>,
    callback: sendUnaryData<{ tensors: number }>,
  ): Promise<void> {
    let job: JobShard | undefined;
    let header: { jobId: string; trainerId: string } | undefined;
    let assembler: TensorAssembler | undefined;
    let failed = false;
    try {
      for await (const chunk of call as AsyncIterable<InitChunk>) {
        if (failed) continue;
        try {
          if (!header) {
            header = { jobId: chunk.jobId, trainerId: chunk.trainerId };
            job = await this.shard.job(chunk.jobId);
            const j = job;
            assembler = new TensorAssembler((name, dtype, shape) => j.expectInitTensor(name, dtype, shape));
          } else {
            sameHeader(header, chunk);
          }
          if (chunk.tensor) assembler!.add(chunk.tensor);
        } catch (err) {
          failed = true;
          callback(this.toServiceError(err, 'InitParams'));
        }
      }
      if (failed) return;
      if (!job || !header || !assembler) throw new InvalidRequestError('InitParams', 'the stream carried no chunk');
      const tensors = assembler.finish().map((t) => ({
        name: t.name,
        shape: t.shape,
        value: typedArrayOf(t.dtype, t.bytes) as Float32Array,
      }));
      job.initTensors(header.trainerId, tensors);
      callback(null, { tensors: job.status().tensors });
    } catch (err) {
      if (!failed) callback(this.toServiceError(err, 'InitParams'));
    }
  }

  private async pushGradients(
    call: ServerReadableStream<PushChunk, PushReply>,
    callback: sendUnaryData<PushReply>,
  ): Promise<void> {
    const push = await this.receivePush(call, (err) => callback(this.toServiceError(err, 'PushGradients')));
    if (push) callback(null, push.reply);
  }

  /**
   * PushGradients, then the parameters the trainer needs next (see the proto and `answerPush`);
   * the call ends once they are sent, or after the outcome when they did not come in time.
   */
  private async pushPull(call: ServerDuplexStream<PushChunk, PushPullReply>): Promise<void> {
    // Reading must not end the call: a finished async iteration destroys the stream by default,
    // and the reply has not been written yet.
    const chunks = call.iterator({ destroyOnReturn: false }) as AsyncIterable<PushChunk>;
    const push = await this.receivePush(chunks, (err) => call.emit('error', this.toServiceError(err, 'PushPull')));
    if (!push) return;
    const cancel = cancellation(call, 'push-pull cancelled by the client');
    try {
      if (await this.answerPush(call, push, cancel.signal)) call.end();
    } finally {
      cancel.dispose();
    }
  }

  /**
   * Steps: PushPull's rounds one after another on one stream (see the proto). A refused round is
   * answered in-band and the stream goes on with the next. The stream ends when the trainer ends
   * it, when it is cancelled (which also ends a round's wait for the parameters), or between
   * rounds once the server stops; a round that breaks the framing ends it with an error.
   */
  private async steps(call: ServerDuplexStream<PushChunk, PushPullReply>): Promise<void> {
    const cancel = cancellation(call, 'step stream cancelled by the client');
    const chunks = call.iterator({ destroyOnReturn: false })[Symbol.asyncIterator]() as AsyncIterator<PushChunk>;
    /** The trainer the stream's rounds came from. */
    let from: Pick<PushChunk, 'jobId' | 'trainerId'> | undefined;
    try {
      for (;;) {
        const first = await this.nextRound(chunks, cancel.signal);
        if (first === undefined) break;
        from = first;
        if (!(await this.stepRound(call, first, chunks, cancel.signal))) break;
      }
      if (!cancel.signal.aborted) call.end();
    } catch (err) {
      if (!cancel.signal.aborted) call.emit('error', this.toServiceError(err, 'Steps'));
    } finally {
      cancel.dispose();
      // A trainer ends its stream by half-closing it; cancelled, it may be gone.
      if (cancel.signal.aborted && from !== undefined) this.shard.streamCut(from.jobId, from.trainerId);
    }
  }

  /**
   * The first chunk of a Steps stream's next round; undefined when the stream ended or was
   * cancelled, or the server is stopping, before one came.
   */
  private nextRound(chunks: AsyncIterator<PushChunk>, signal: AbortSignal): Promise<PushChunk | undefined> {
    if (this.stopping || signal.aborted) return Promise.resolve(undefined);
    return new Promise((resolve, reject) => {
      const end = () => resolve(undefined);
      this.idleStepStreams.add(end);
      signal.addEventListener('abort', end);
      chunks
        .next()
        .then((next) => resolve(next.done ? undefined : next.value), reject)
        .finally(() => {
          this.idleStepStreams.delete(end);
          signal.removeEventListener('abort', end);
        });
    });
  }

  /**
   * Reads one round of a Steps stream, from its `first` chunk to the one marked `last`, and
   * answers it as PushPull would; a refusal is answered at once, in-band, and the rest of the
   * round read and dropped. False when the stream ended or was cancelled within the round.
   */
  private async stepRound(
    call: ServerDuplexStream<PushChunk, PushPullReply>,
    first: PushChunk,
    chunks: AsyncIterator<PushChunk>,
    signal: AbortSignal,
  ): Promise<boolean> {
    const { round } = first;
    const receiver = new PushReceiver(this.shard, 'Steps');
    let refused = false;
    for (let chunk = first; ;) {
      if (!refused) {
        try {
          await receiver.add(chunk);
        } catch (err) {
          refused = true;
          this.refuseRound(call, round, err);
        }
      }
      if (chunk.last) break;
      const next = await chunks.next();
      if (next.done) return false;
      chunk = next.value;
      sameHeader({ round }, { round: chunk.round });
    }
    if (refused) return true;
    let push: TakenPush;
    try {
      push = receiver.finish();
    } catch (err) {
      this.refuseRound(call, round, err);
      return true;
    }
    return this.answerPush(call, push, signal, round);
  }

  /** Answers a round of a Steps stream with the refusal PushPull would have failed with. */
  private refuseRound(call: ServerDuplexStream<PushChunk, PushPullReply>, round: number, err: unknown): void {
    const refusal = this.refusalOf(err, 'Steps');
    call.write({
      ...EMPTY_PUSH_PULL_REPLY,
      round,
      roundDone: true,
      statusCode: refusal.code,
      statusMessage: refusal.details,
      statusReason: refusal.reason,
      statusShardVersion: refusal.shardVersion ?? 0,
    });
  }

  /**
   * Answers a taken push: its outcome at once, so a trainer that must stop can stop waiting,
   * then the parameters the trainer needs next when they come within its `pullWaitMs` (else
   * it pulls them as usual). Every message carries the outcome, so when the parameters are
   * there already it comes with the first of them, written before anything else of the event
   * loop's turn runs: no message of its own and no `await` before it. With a `round` (a Steps
   * stream) each message carries it and the
   * round's last one `roundDone`, which is a message of its own when the parameters did not
   * come. False when `signal` (the client's cancel) cut it short.
   */
  private async answerPush(
    call: ServerDuplexStream<PushChunk, PushPullReply>,
    push: TakenPush,
    signal: AbortSignal,
    round?: number,
  ): Promise<boolean> {
    const { job, header, reply, paramsType } = push;
    const outcome = {
      ...EMPTY_PUSH_PULL_REPLY,
      round: round ?? 0,
      pushVersion: reply.version,
      accepted: reply.accepted,
    };
    const target = job.nextWanted(header.version, reply.version);
    let told = false;
    try {
      job.wants(target);
      if (!job.reached(target)) {
        told = true;
        call.write(outcome);
        await job.waitForVersion(target, header.pullWaitMs, signal);
      }
    } catch {
      // Not ready in time, or the shard is closing: the trainer pulls, and hears why there.
      if (signal.aborted) return false;
      if (round !== undefined) call.write({ ...outcome, roundDone: true });
      else if (!told) call.write(outcome);
      return true;
    }
    const { version, tensors, release } = job.lease();
    return this.streamTensors(call, tensors, paramsType, signal, release, (tensor, last) => ({
      ...outcome,
      withParams: true,
      version,
      tensorCount: tensors.length,
      tensor,
      roundDone: round !== undefined && last,
    }));
  }

  /**
   * Reads a push stream whole and hands its gradients to the job (see `PushReceiver`). Returns
   * undefined after `refuse` was called with the error when anything is wrong (the rest of the
   * stream is read and dropped).
   */
  private async receivePush(
    call: AsyncIterable<PushChunk>,
    refuse: (err: unknown) => void,
  ): Promise<TakenPush | undefined> {
    const receiver = new PushReceiver(this.shard, 'PushGradients');
    let failed = false;
    try {
      for await (const chunk of call) {
        if (failed) continue;
        try {
          await receiver.add(chunk);
        } catch (err) {
          failed = true;
          refuse(err);
        }
      }
      return failed ? undefined : receiver.finish();
    } catch (err) {
      if (!failed) refuse(err);
      return undefined;
    }
  }

  private async pullParams(call: ServerWritableStream<PullRequest, PullChunk>): Promise<void> {
    const req = call.request;
    const cancel = cancellation(call, 'pull cancelled by the client');
    try {
      const paramsType = requestedParamsType(req.dtype, 'dtype');
      const job = await this.shard.job(req.jobId);
      job.touch(req.trainerId);
      // A snapshot this shard has not reached yet (another shard announced it first) is waited for.
      const waitFor = req.snapshotVersion ?? req.minVersion;
      if (req.snapshotVersion === undefined) job.wants(req.minVersion);
      if (req.snapshotVersion === undefined || job.version < req.snapshotVersion) {
        await job.waitForVersion(waitFor, req.waitMs, cancel.signal);
      }
      const { version, tensors, release } = job.lease(req.snapshotVersion);
      const sent = await this.streamTensors(call, tensors, paramsType, cancel.signal, release, (tensor) => ({
        version,
        tensorCount: tensors.length,
        tensor,
      }));
      if (sent) call.end();
    } catch (err) {
      if (cancel.signal.aborted) return;
      call.emit('error', this.toServiceError(err, 'PullParams'));
    } finally {
      cancel.dispose();
    }
  }

  /**
   * Streams leased tensors in parts as `dtype`, one message per part (`message(undefined, true)`
   * alone when there are none; `last` marks the final part), waiting for the client to drain;
   * stops quietly once aborted. Releases the lease once the last message is written (see
   * `releaseOnceWritten`). True when every message was written.
   */
  private async streamTensors<M>(
    call: Writable & { cancelled: boolean },
    tensors: readonly NamedTensor<TensorArray>[],
    dtype: DataType,
    signal: AbortSignal,
    release: () => void,
    message: (part: Tensor | undefined, last: boolean) => M,
  ): Promise<boolean> {
    const written = releaseOnceWritten(call, release);
    const maxChunkBytes = this.maxChunkBytes;
    function* parts(): Generator<Tensor | undefined> {
      for (const t of tensors) yield* tensorParts(t, maxChunkBytes, dtype);
    }
    const messages = tensors.length === 0 ? lastMarked([undefined]) : lastMarked(parts());
    for (const [part, last] of messages) {
      if (signal.aborted) break;
      if (!call.write(message(part, last), last ? written : undefined) && !last) {
        await Promise.race([once(call, 'drain'), once(signal, 'abort')]);
      }
    }
    // Aborted means cancelled: grpc-js serializes nothing more.
    if (signal.aborted) written();
    return !signal.aborted;
  }

  private toServiceError(err: unknown, method: string): ServerErrorResponse {
    const { code, details, reason, shardVersion } = this.refusalOf(err, method);
    const metadata = new Metadata();
    if (reason !== '') metadata.set(ERROR_REASON_METADATA_KEY, reason);
    if (shardVersion !== undefined) metadata.set(SHARD_VERSION_METADATA_KEY, String(shardVersion));
    const message = err instanceof Error ? err.message : String(err);
    return Object.assign(new Error(message), { code, details, metadata });
  }

  /** The status a handler's error is refused with; an unexpected error is logged, as INTERNAL. */
  private refusalOf(err: unknown, method: string): Refusal {
    if (err instanceof ShardError) {
      return {
        code: REASON_CODES[err.reason],
        details: err.message,
        reason: err.reason,
        shardVersion: err instanceof GradientVersionError ? err.shardVersion : undefined,
      };
    }
    if (err instanceof MalformedTensorError) {
      return { code: GrpcStatus.INVALID_ARGUMENT, details: err.message, reason: 'invalid-tensor' };
    }
    const message = err instanceof Error ? err.message : String(err);
    this.logger?.error(`${method} failed: ${err instanceof Error ? (err.stack ?? message) : message}`);
    return { code: GrpcStatus.INTERNAL, details: `${method}: ${message}`, reason: '' };
  }
}

/** An abort signal that aborts when the client cancels `call`; `dispose` stops watching. */
function cancellation(call: EventEmitter, reason: string): { signal: AbortSignal; dispose(): void } {
  const abort = new AbortController();
  const onCancel = () => abort.abort(new Error(reason));
  call.on('cancelled', onCancel);
  return { signal: abort.signal, dispose: () => call.off('cancelled', onCancel) };
}

/**
 * Returns the write callback after which no message written to `call` can read the parameters
 * leased any more, and calls `release` then. A message is a set of views of the leased arrays
 * (`tensorParts` copies nothing of parameters that travel as float32) until grpc-js serializes
 * it, which it does, copying the bytes, before that write completes; writes complete in order,
 * and writes queued behind a slow client wait unserialized. So the lease ends when the last
 * message's write completes, or when the call finished, was cancelled or destroyed (grpc-js
 * then serializes nothing more), whichever comes first.
 */
function releaseOnceWritten(call: Writable & { cancelled: boolean }, release: () => void): () => void {
  let released = false;
  const done = () => {
    if (released) return;
    released = true;
    stopWatching();
    call.off('cancelled', done);
    release();
  };
  const stopWatching = finished(call, { readable: false }, () => done());
  call.once('cancelled', done);
  if (call.cancelled || call.writableFinished || call.destroyed) done();
  return done;
}

/** Each item with whether it is the last one (the next is read ahead). */
function* lastMarked<T>(items: Iterable<T>): Generator<[T, boolean]> {
  const it = items[Symbol.iterator]();
  for (let current = it.next(); !current.done;) {
    const next = it.next();
    yield [current.value, next.done === true];
    current = next;
  }
}

/**
 * Raises the HTTP/2 receive windows of every session the server accepts from the default 64 KiB,
 * which otherwise limits a push to one window per round trip. grpc-js 1.14 applies
 * `grpc-node.flow_control_window` to clients only (grpc/grpc-node#3058), so this reaches its
 * HTTP/2 servers, which are private; when that fails the server runs with the default windows.
 */
export function widenReceiveWindows(server: Server, bytes: number): void {
  const http2Servers = (server as unknown as { http2Servers?: unknown }).http2Servers;
  if (!(http2Servers instanceof Map)) return;
  for (const h2 of http2Servers.keys() as Iterable<EventEmitter>) {
    if (h2.listeners('session').some((l) => (l as { widensWindows?: boolean }).widensWindows)) continue;
    const onSession = (session: ServerHttp2Session) => {
      try {
        session.setLocalWindowSize(bytes);
        session.settings({ initialWindowSize: Math.min(bytes, 2 ** 31 - 1) });
      } catch {
        // A session that closed at once needs no window.
      }
    };
    h2.on('session', Object.assign(onSession, { widensWindows: true }));
  }
}
