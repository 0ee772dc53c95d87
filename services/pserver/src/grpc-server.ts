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
  ERROR_REASON_METADATA_KEY,
  FLOW_CONTROL_WINDOW_BYTES,
  TENSOR_CHUNK_SIZE_BYTES,
  MalformedTensorError,
  ParameterServerService,
  SERVER_CHANNEL_OPTIONS,
  SHARD_VERSION_METADATA_KEY,
  TensorAssembler,
  float32Values,
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
 * Beside it, the standard health service (`grpc.health.v1.Health`) says SERVING from `start`
 * until `stop`, NOT_SERVING otherwise.
 */
export class PserverGrpcServer {
  private readonly server = new Server(SERVER_CHANNEL_OPTIONS);
  private readonly logger?: LineLogger;
  private readonly maxChunkBytes: number;
  private bound?: { host: string; port: number };
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
        const { version, countedFrom } = (await this.shard.job(req.jobId)).join(req.trainerId);
        return { version, countedFromVersion: countedFrom };
      }),
      leave: this.unary('Leave', async (req) => {
        (await this.shard.job(req.jobId)).leave(req.trainerId);
        return {};
      }),
      pushGradients: (call, callback) => void this.pushGradients(call, callback),
      pullParams: (call) => void this.pullParams(call),
      pushPull: (call) => void this.pushPull(call),
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
   * PushGradients, then the parameters the trainer needs next (see the proto). The push's
   * outcome goes out at once, so a trainer that must stop can stop waiting; the parameters
   * follow when they come within `pullWaitMs`, else the stream ends after the outcome and the
   * trainer pulls them as usual.
   */
  private async pushPull(call: ServerDuplexStream<PushChunk, PushPullReply>): Promise<void> {
    // Reading must not end the call: a finished async iteration destroys the stream by default,
    // and the reply has not been written yet.
    const chunks = call.iterator({ destroyOnReturn: false }) as AsyncIterable<PushChunk>;
    const push = await this.receivePush(chunks, (err) => call.emit('error', this.toServiceError(err, 'PushPull')));
    if (!push) return;
    const { job, header, reply, paramsType } = push;
    const outcome = { pushVersion: reply.version, accepted: reply.accepted };
    call.write({ ...outcome, withParams: false, version: 0, tensorCount: 0 });
    const abort = new AbortController();
    const onCancel = () => abort.abort(new Error('push-pull cancelled by the client'));
    call.on('cancelled', onCancel);
    try {
      const target = job.nextWanted(header.version, reply.version);
      try {
        job.wants(target);
        await job.waitForVersion(target, header.pullWaitMs, abort.signal);
      } catch {
        // Not ready in time, or the shard is closing: the trainer pulls, and hears why there.
        if (!abort.signal.aborted) call.end();
        return;
      }
      const { version, tensors, release } = job.lease();
      try {
        await this.streamTensors(call, tensors, paramsType, abort.signal, (tensor) => ({
          ...outcome,
          withParams: true,
          version,
          tensorCount: tensors.length,
          tensor,
        }));
      } finally {
        releaseOnceSent(call, release);
      }
    } finally {
      call.off('cancelled', onCancel);
    }
  }

  /**
   * Reads a push stream whole and hands its gradients, decoded to float32 from the dtype each
   * tensor says, to the job. Returns undefined after `refuse` was called with the error when
   * anything is wrong (the rest of the stream is read and dropped). `paramsType` is what a
   * push-pull's parameters are to travel in.
   */
  private async receivePush(
    call: AsyncIterable<PushChunk>,
    refuse: (err: unknown) => void,
  ): Promise<{ job: JobShard; header: PushHeader; reply: PushReply; paramsType: DataType } | undefined> {
    let job: JobShard | undefined;
    let header: PushHeader | undefined;
    let assembler: TensorAssembler | undefined;
    let failed = false;
    try {
      for await (const chunk of call) {
        if (failed) continue;
        try {
          if (!header) {
            header = {
              jobId: chunk.jobId,
              trainerId: chunk.trainerId,
              version: chunk.version,
              samples: chunk.samples,
              pullWaitMs: chunk.pullWaitMs,
              pullDtype: chunk.pullDtype,
            };
            requestedParamsType(chunk.pullDtype, 'pull_dtype');
            job = await this.shard.job(chunk.jobId);
            // Refuse a stale push before reading megabytes of it.
            job.checkPushVersion(chunk.version);
            const j = job;
            assembler = new TensorAssembler((name, dtype, shape) => j.expectGradient(name, dtype, shape));
          } else {
            sameHeader(header, chunk);
          }
          if (chunk.tensor) assembler!.add(chunk.tensor);
        } catch (err) {
          failed = true;
          refuse(err);
        }
      }
      if (failed) return undefined;
      if (!job || !header || !assembler) throw new InvalidRequestError('PushGradients', 'the stream carried no chunk');
      const gradients = new Map(assembler.finish().map((t) => [t.name, float32Values(t)]));
      return {
        job,
        header,
        reply: job.push(header.trainerId, header.version, header.samples, gradients),
        paramsType: requestedParamsType(header.pullDtype, 'pull_dtype'),
      };
    } catch (err) {
      if (!failed) refuse(err);
      return undefined;
    }
  }

  private async pullParams(call: ServerWritableStream<PullRequest, PullChunk>): Promise<void> {
    const req = call.request;
    const abort = new AbortController();
    const onCancel = () => abort.abort(new Error('pull cancelled by the client'));
    call.on('cancelled', onCancel);
    try {
      const paramsType = requestedParamsType(req.dtype, 'dtype');
      const job = await this.shard.job(req.jobId);
      job.touch(req.trainerId);
      // A snapshot this shard has not reached yet (another shard announced it first) is waited for.
      const waitFor = req.snapshotVersion ?? req.minVersion;
      if (req.snapshotVersion === undefined) job.wants(req.minVersion);
      if (req.snapshotVersion === undefined || job.version < req.snapshotVersion) {
        await job.waitForVersion(waitFor, req.waitMs, abort.signal);
      }
      const { version, tensors, release } = job.lease(req.snapshotVersion);
      try {
        await this.streamTensors(call, tensors, paramsType, abort.signal, (tensor) => ({
          version,
          tensorCount: tensors.length,
          tensor,
        }));
      } finally {
        releaseOnceSent(call, release);
      }
    } catch (err) {
      if (abort.signal.aborted) return;
      call.emit('error', this.toServiceError(err, 'PullParams'));
    } finally {
      call.off('cancelled', onCancel);
    }
  }

  /**
   * Streams tensors in parts as `dtype`, one message per part (`message(undefined)` alone when
   * there are none), waiting for the client to drain, then ends the stream; stops quietly once
   * aborted.
   */
  private async streamTensors<M>(
    call: { write(message: M): boolean; end(): void } & EventEmitter,
    tensors: readonly NamedTensor<TensorArray>[],
    dtype: DataType,
    signal: AbortSignal,
    message: (part: Tensor | undefined) => M,
  ): Promise<void> {
    if (tensors.length === 0) call.write(message(undefined));
    for (const t of tensors) {
      for (const part of tensorParts(t, this.maxChunkBytes, dtype)) {
        if (signal.aborted) return;
        if (!call.write(message(part))) {
          await Promise.race([once(call, 'drain'), once(signal, 'abort')]);
        }
      }
    }
    if (!signal.aborted) call.end();
  }

  private toServiceError(err: unknown, method: string): ServerErrorResponse {
    const metadata = new Metadata();
    if (err instanceof ShardError) {
      metadata.set(ERROR_REASON_METADATA_KEY, err.reason);
      if (err instanceof GradientVersionError) metadata.set(SHARD_VERSION_METADATA_KEY, String(err.shardVersion));
      return Object.assign(new Error(err.message), { code: REASON_CODES[err.reason], details: err.message, metadata });
    }
    if (err instanceof MalformedTensorError) {
      metadata.set(ERROR_REASON_METADATA_KEY, 'invalid-tensor');
      return Object.assign(new Error(err.message), {
        code: GrpcStatus.INVALID_ARGUMENT,
        details: err.message,
        metadata,
      });
    }
    const message = err instanceof Error ? err.message : String(err);
    this.logger?.error(`${method} failed: ${err instanceof Error ? (err.stack ?? message) : message}`);
    return Object.assign(new Error(message), { code: GrpcStatus.INTERNAL, details: `${method}: ${message}`, metadata });
  }
}

/**
 * Calls `release` once no message written to `call` can read the parameters it leased any more.
 * A message is a set of views of the leased arrays (`tensorParts` copies nothing of parameters
 * that travel as float32) until grpc-js serializes it, which it does, copying the bytes, before
 * that write completes; writes queued behind a slow client wait unserialized. So the lease ends when the call finished (every write
 * completed), or was cancelled or destroyed (grpc-js then serializes nothing more).
 */
function releaseOnceSent(call: Writable & { cancelled: boolean }, release: () => void): void {
  if (call.cancelled || call.writableFinished || call.destroyed) {
    release();
    return;
  }
  const done = () => {
    stopWatching();
    call.off('cancelled', done);
    release();
  };
  const stopWatching = finished(call, { readable: false }, done);
  call.once('cancelled', done);
}

/**
 * Raises the HTTP/2 receive windows of every session the server accepts from the default 64 KiB,
 * which otherwise limits a push to one window per round trip. grpc-js 1.14 applies
 * `grpc-node.flow_control_window` to clients only (grpc/grpc-node#3058), so this reaches its
 * HTTP/2 servers, which are private; when that fails the server runs with the default windows.
 */
function widenReceiveWindows(server: Server, bytes: number): void {
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

/** The fields every chunk of a push repeats. */
interface PushHeader {
  jobId: string;
  trainerId: string;
  version: number;
  samples: number;
  pullWaitMs: number;
  pullDtype: DataType;
}

/** Every chunk of a stream must repeat the first chunk's header fields. */
function sameHeader<H extends object>(header: H, chunk: H): void {
  for (const key of Object.keys(header) as (keyof H & string)[]) {
    if (header[key] !== chunk[key]) {
      throw new InvalidRequestError(
        key,
        `changed within the stream from ${JSON.stringify(header[key])} to ${JSON.stringify(chunk[key])}`,
      );
    }
  }
}
