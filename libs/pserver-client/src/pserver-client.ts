import {
  Metadata,
  type ChannelOptions,
  type ClientDuplexStream,
  type ClientWritableStream,
  type ServiceError,
} from '@grpc/grpc-js';
import {
  CLIENT_CHANNEL_OPTIONS,
  FLOAT_WIRE_TYPES,
  TENSOR_CHUNK_SIZE_BYTES,
  DataType,
  ParameterServerClient,
  TensorAssembler,
  channelCredentials,
  tensorParts,
  tlsChannelOptions,
  toNamedTensor,
  type BeginInitReply,
  type BeginInitRequest,
  type FinishInitReply,
  type FloatWireType,
  type InitChunk,
  type InitParamsReply,
  type JoinReply,
  type NamedTensor,
  type PserverTls,
  type PullChunk,
  type PushChunk,
  type PushPullReply,
  type PushReply,
  type SaveReply,
  type StatusReply,
  type Tensor,
  type TensorArray,
} from '#libs/pserver-protocol';
import { CALL_TIMEOUT_MS, DEFAULT_PULL_WAIT_MS, PULL_DEADLINE_MARGIN_MS } from './call-deadlines.js';
import { fromServiceError } from './errors.js';
import { StepStream } from './step-stream.js';

/** Settings of a `PserverClient`. */
export interface PserverClientOptions {
  /** The shard this client talks to, used in errors. Default 0. */
  shard?: number;
  /** Extra or overriding gRPC channel options. */
  channelOptions?: ChannelOptions;
  /** Deadline of unary calls and pushes. Default `CALL_TIMEOUT_MS`. */
  callTimeoutMs?: number;
  /** Tensor bytes per streamed message. Default `TENSOR_CHUNK_SIZE_BYTES`. */
  maxChunkBytes?: number;
  /** The element types tensors travel in. Default float32 both ways. */
  transfer?: Partial<TransferTypes>;
  /**
   * Whether `pushPull` runs its rounds on a long-lived `Steps` stream (the default) rather than
   * one `PushPull` call each, which pays the call's setup every step; false for a shard that
   * predates `Steps`.
   */
  stepStreams?: boolean;
  /** TLS to the shard, with a client certificate for mutual TLS. Default plain text. */
  tls?: PserverTls;
}

/**
 * The element types a client's float32 tensors travel in; float16 and bfloat16 take half the
 * bytes, rounded to nearest even. Initial parameters always travel as float32.
 */
export interface TransferTypes {
  /** Gradients pushed to the shard. */
  gradients: FloatWireType;
  /** Parameters the shard sends back, to pulls and push-pulls. */
  params: FloatWireType;
}

/** What a pull asks for. */
export interface PullOptions {
  /** Wait until the shard reaches this version. Default 0 (any initialised version). */
  minVersion?: number;
  /** How long the shard waits for `minVersion` (or initialisation). Default `DEFAULT_PULL_WAIT_MS`. */
  waitMs?: number;
  /** Pull this retained snapshot instead of the live parameters. */
  snapshotVersion?: number;
  /** The pulling trainer, which keeps its membership alive. */
  trainerId?: string;
}

/** One shard's parameters at one version. */
export interface PulledShard {
  version: number;
  tensors: NamedTensor<TensorArray>[];
}

/** What a push-pull came to: the push's outcome, and the parameters when they came with it. */
export interface PushPullResult {
  push: PushReply;
  /** Undefined when the shard did not have them within the wait (pull them as usual). */
  params?: PulledShard;
}

/** A push of one shard's gradients. */
export interface PushRequest {
  jobId: string;
  trainerId: string;
  /** The shard version the gradients were computed from. */
  version: number;
  /** Examples behind the gradients. */
  samples: number;
  gradients: readonly NamedTensor<TensorArray>[];
}

/**
 * A typed client of one parameter server shard. Tensors of any size are streamed in parts, and
 * every failure is a `PserverError` subclass (`StaleGradientError`, `InvalidGradientError`,
 * `PserverUnavailableError`, `PserverTimeoutError`). The channel reconnects by itself; a shard
 * that moved to another address needs a new client (`ShardedPserverClient` does that).
 */
export class PserverClient {
  private readonly client: ParameterServerClient;
  private readonly shard: number;
  private readonly callTimeoutMs: number;
  private readonly maxChunkBytes: number;
  private readonly gradientType: DataType;
  private readonly paramsType: DataType;
  private readonly stepStreams: boolean;
  /** Open `Steps` streams; a round takes an idle one or opens one. */
  private readonly steps = new Set<StepStream>();

  constructor(
    /** `host:port` of the shard. */
    readonly address: string,
    options: PserverClientOptions = {},
  ) {
    this.shard = options.shard ?? 0;
    this.callTimeoutMs = options.callTimeoutMs ?? CALL_TIMEOUT_MS;
    this.stepStreams = options.stepStreams ?? true;
    this.maxChunkBytes = options.maxChunkBytes ?? TENSOR_CHUNK_SIZE_BYTES;
    this.gradientType = wireType(options.transfer?.gradients ?? 'float32', 'gradients');
    this.paramsType = wireType(options.transfer?.params ?? 'float32', 'params');
    this.client = new ParameterServerClient(address, channelCredentials(options.tls), {
      ...CLIENT_CHANNEL_OPTIONS,
      ...tlsChannelOptions(options.tls),
      ...options.channelOptions,
    });
  }

  /** Asks to initialise the job's parameters; on shard 0 this is the election. */
  beginInit(request: BeginInitRequest): Promise<BeginInitReply> {
    return this.unary((cb) => this.client.beginInit(request, this.meta(), this.callOptions(), cb));
  }

  /** Streams this shard's initial parameters (the elected trainer only). */
  initParams(jobId: string, trainerId: string, tensors: readonly NamedTensor<TensorArray>[]): Promise<InitParamsReply> {
    const chunks = this.chunked(tensors, DataType.FLOAT32, (tensor) => ({ jobId, trainerId, tensor }));
    return this.clientStream<InitChunk, InitParamsReply>(
      (cb) => this.client.initParams(this.meta(), this.callOptions(), cb),
      chunks,
    );
  }

  /** Marks this shard's parameters complete; the shard is then at version 0. */
  finishInit(jobId: string, trainerId: string): Promise<FinishInitReply> {
    return this.unary((cb) => this.client.finishInit({ jobId, trainerId }, this.meta(), this.callOptions(), cb));
  }

  /**
   * Joins the job's synchronous quorum (idempotent; also a liveness refresh), counted from
   * `countedFromAtLeast` at the earliest.
   */
  join(jobId: string, trainerId: string, countedFromAtLeast = 0): Promise<JoinReply> {
    return this.unary((cb) =>
      this.client.join({ jobId, trainerId, countedFromAtLeast }, this.meta(), this.callOptions(), cb),
    );
  }

  /** Leaves the job's quorum at once. */
  async leave(jobId: string, trainerId: string): Promise<void> {
    await this.unary((cb) => this.client.leave({ jobId, trainerId }, this.meta(), this.callOptions(), cb));
  }

  /**
   * Pushes gradients for `version`, in the client's `transfer.gradients` type. A refusal rejects
   * with `StaleGradientError` (version) or `InvalidGradientError` (names, shapes, values); a
   * refused push changed nothing.
   */
  pushGradients(request: PushRequest): Promise<PushReply> {
    const { jobId, trainerId, version, samples, gradients } = request;
    // A shard that owns no parameters still gets one chunk, so the push counts.
    const chunks = this.chunked(gradients, this.gradientType, (tensor) => ({
      jobId,
      trainerId,
      version,
      samples,
      tensor,
      pullWaitMs: 0,
      pullDtype: DataType.UNSPECIFIED,
      round: 0,
      last: false,
    }));
    return this.clientStream<PushChunk, PushReply>(
      (cb) => this.client.pushGradients(this.meta(), this.callOptions(), cb),
      chunks,
      version,
    );
  }

  /**
   * Pushes gradients like `pushGradients` and receives, in the same call, the parameters the
   * trainer needs next (see `PushPull` in the proto), waiting up to `waitMs` for them on the
   * shard. Once the push's outcome is in, `signal` ends the wait for the parameters (the result
   * then has none); the push itself is never cut. Refusals reject as `pushGradients` does.
   *
   * Rounds run on a `Steps` stream (see `StepStream`), opened on first use and kept for the
   * next round, unless the client was made without `stepStreams`; a round that fails with the
   * stream, or outlives `callTimeoutMs + waitMs`, rejects as a failed call would and the next
   * round opens a new stream. `onSent` is called once the whole push was handed to the
   * connection, so a caller can tell when the push no longer needs this process's event loop.
   */
  async pushPull(
    request: PushRequest,
    waitMs: number,
    signal?: AbortSignal,
    onSent?: () => void,
  ): Promise<PushPullResult> {
    const chunks = this.pushPullChunks(request, waitMs);
    if (!this.stepStreams) return this.pushPullCall(chunks, request.version, waitMs, signal, onSent);
    const stream = this.idleStepStream() ?? this.openStepStream();
    try {
      return await stream.run({
        chunks,
        pushedVersion: request.version,
        timeoutMs: this.callTimeoutMs + waitMs,
        signal,
        onSent,
      });
    } finally {
      if (!stream.usable) this.steps.delete(stream);
    }
  }

  /** A push-pull's messages, as `pushGradients` sends them with the wait and the params' type. */
  private pushPullChunks(request: PushRequest, waitMs: number): Iterator<PushChunk> {
    const { jobId, trainerId, version, samples, gradients } = request;
    return this.chunked(gradients, this.gradientType, (tensor) => ({
      jobId,
      trainerId,
      version,
      samples,
      tensor,
      pullWaitMs: waitMs,
      pullDtype: this.paramsType,
      round: 0,
      last: false,
    }));
  }

  private idleStepStream(): StepStream | undefined {
    for (const stream of this.steps) {
      if (!stream.usable) this.steps.delete(stream);
      else if (!stream.busy) return stream;
    }
    return undefined;
  }

  private openStepStream(): StepStream {
    const stream = new StepStream(() => this.client.steps(this.meta()), this.shard);
    this.steps.add(stream);
    return stream;
  }

  /** One push-pull round as a `PushPull` call of its own. */
  private async pushPullCall(
    chunks: Iterator<PushChunk>,
    version: number,
    waitMs: number,
    signal?: AbortSignal,
    onSent?: () => void,
  ): Promise<PushPullResult> {
    const call: ClientDuplexStream<PushChunk, PushPullReply> = this.client.pushPull(this.meta(), {
      deadline: Date.now() + this.callTimeoutMs + waitMs,
    });
    const assembler = new TensorAssembler();
    let push: PushReply | undefined;
    let paramsVersion = -1;
    let expected = 0;
    let withParams = false;
    let writeError: unknown;
    const sent = this.writeAll(call, chunks).then(onSent, (err: unknown) => {
      writeError = err;
      call.cancel();
    });
    const stopWaiting = () => {
      if (push !== undefined) call.cancel();
    };
    signal?.addEventListener('abort', stopWaiting);
    try {
      for await (const reply of call as AsyncIterable<PushPullReply>) {
        push ??= { version: reply.pushVersion, accepted: reply.accepted };
        if (signal?.aborted) break;
        if (!reply.withParams) continue;
        withParams = true;
        paramsVersion = reply.version;
        expected = reply.tensorCount;
        if (reply.tensor) assembler.add(reply.tensor);
      }
      await sent;
      if (writeError !== undefined) throw writeError;
      if (push === undefined) throw new Error('push-pull ended without a reply');
      if (!withParams || signal?.aborted) return { push };
      const tensors = assembler.finish().map(toNamedTensor);
      if (tensors.length !== expected) throw new Error(`push-pull ended with ${tensors.length} of ${expected} tensors`);
      return { push, params: { version: paramsVersion, tensors } };
    } catch (err) {
      call.cancel();
      // The push was taken; only the wait for the parameters was cut.
      if (push !== undefined && signal?.aborted && writeError === undefined) return { push };
      throw fromServiceError(writeError ?? err, this.shard, version);
    } finally {
      signal?.removeEventListener('abort', stopWaiting);
    }
  }

  /**
   * Pulls the shard's parameters, waiting on the shard for `minVersion` first. They travel in
   * the client's `transfer.params` type and come back as float32.
   */
  async pullParams(jobId: string, options: PullOptions = {}): Promise<PulledShard> {
    const waitMs = options.waitMs ?? DEFAULT_PULL_WAIT_MS;
    const call = this.client.pullParams(
      {
        jobId,
        minVersion: options.minVersion ?? 0,
        waitMs,
        snapshotVersion: options.snapshotVersion,
        trainerId: options.trainerId ?? '',
        dtype: this.paramsType,
      },
      this.meta(),
      { deadline: Date.now() + waitMs + PULL_DEADLINE_MARGIN_MS },
    );
    const assembler = new TensorAssembler();
    let version = -1;
    let expected = 0;
    try {
      for await (const chunk of call as AsyncIterable<PullChunk>) {
        version = chunk.version;
        expected = chunk.tensorCount;
        if (chunk.tensor) assembler.add(chunk.tensor);
      }
      const tensors = assembler.finish().map(toNamedTensor);
      if (version < 0 || tensors.length !== expected) {
        throw new Error(`pull ended with ${tensors.length} of ${expected} tensors`);
      }
      return { version, tensors };
    } catch (err) {
      call.cancel();
      throw fromServiceError(err, this.shard);
    }
  }

  /** Checkpoints the job on this shard (to `path`, or the shard's own directory). */
  save(jobId: string, path = ''): Promise<SaveReply> {
    return this.unary((cb) => this.client.save({ jobId, path }, this.meta(), this.callOptions(), cb));
  }

  /** The shard's view of one job (or of all its jobs when `jobId` is empty). */
  status(jobId = ''): Promise<StatusReply> {
    return this.unary((cb) => this.client.status({ jobId }, this.meta(), this.callOptions(), cb));
  }

  /** Ends the step streams and closes the channel; calls in flight fail. */
  close(): void {
    for (const stream of this.steps) stream.close();
    this.steps.clear();
    this.client.close();
  }

  /**
   * The messages of a stream: `wrap` around every part of every tensor, sent as `dtype`, or
   * around no tensor at all when there are none.
   */
  private *chunked<M>(
    tensors: readonly NamedTensor<TensorArray>[],
    dtype: DataType,
    wrap: (part?: Tensor) => M,
  ): Generator<M> {
    let sent = false;
    for (const t of tensors) {
      for (const part of tensorParts(t, this.maxChunkBytes, dtype)) {
        sent = true;
        yield wrap(part);
      }
    }
    if (!sent) yield wrap(undefined);
  }

  private meta(): Metadata {
    return new Metadata();
  }

  private callOptions() {
    return { deadline: Date.now() + this.callTimeoutMs };
  }

  private unary<T>(start: (cb: (err: ServiceError | null, res: T) => void) => unknown): Promise<T> {
    return new Promise((resolve, reject) => {
      start((err, res) => (err ? reject(fromServiceError(err, this.shard)) : resolve(res)));
    });
  }

  /** Writes every message, waiting for the stream to drain, then ends it. */
  private writeAll<Req>(call: ClientDuplexStream<Req, unknown>, messages: Iterator<Req>): Promise<void> {
    return new Promise((resolve, reject) => {
      const pump = (): void => {
        try {
          for (;;) {
            const next = messages.next();
            if (next.done) {
              call.end();
              resolve();
              return;
            }
            if (!call.write(next.value)) {
              call.once('drain', pump);
              return;
            }
          }
        } catch (err) {
          reject(err as Error);
        }
      };
      pump();
    });
  }

  private clientStream<Req, Res>(
    start: (cb: (err: ServiceError | null, res: Res) => void) => ClientWritableStream<Req>,
    messages: Iterator<Req>,
    pushedVersion?: number,
  ): Promise<Res> {
    return new Promise((resolve, reject) => {
      let settled = false;
      const call = start((err, res) => {
        settled = true;
        if (err) reject(fromServiceError(err, this.shard, pushedVersion));
        else resolve(res);
      });
      const pump = (): void => {
        try {
          while (!settled) {
            const next = messages.next();
            if (next.done) {
              call.end();
              return;
            }
            if (!call.write(next.value)) {
              call.once('drain', pump);
              return;
            }
          }
        } catch (err) {
          settled = true;
          call.cancel();
          reject(fromServiceError(err, this.shard, pushedVersion));
        }
      };
      pump();
    });
  }
}

/** The data type of a transfer setting, refusing a name that is none (from untyped callers). */
function wireType(name: FloatWireType, field: keyof TransferTypes): DataType {
  if (!Object.hasOwn(FLOAT_WIRE_TYPES, name)) {
    throw new RangeError(`transfer.${field}: expected float32, float16 or bfloat16, got ${JSON.stringify(name)}`);
  }
  return FLOAT_WIRE_TYPES[name];
}
