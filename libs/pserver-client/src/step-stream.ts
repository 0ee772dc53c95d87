import { Metadata, status as GrpcStatus, type ClientDuplexStream, type ServiceError } from '@grpc/grpc-js';
import {
  ERROR_REASON_METADATA_KEY,
  SHARD_VERSION_METADATA_KEY,
  TensorAssembler,
  toNamedTensor,
  type PushChunk,
  type PushPullReply,
  type PushReply,
} from '#libs/pserver-protocol';
import { fromServiceError } from './errors.js';
import type { PushPullResult } from './pserver-client.js';

/** One push-pull round: the push's chunks (their `round` and `last` are set here) and its limits. */
export interface StepRound {
  chunks: Iterator<PushChunk>;
  /** The shard version the gradients were computed from, for a stale refusal. */
  pushedVersion: number;
  /** How long the whole round may take before it fails as a timeout and resets the stream. */
  timeoutMs: number;
  /** Once the push's outcome is in, ends the wait for the parameters (see `PserverClient.pushPull`). */
  signal?: AbortSignal;
  /** Called once the push's last chunk was handed to the connection (not when refused earlier). */
  onSent?: () => void;
}

/** The round in progress: what its replies and the stream's end are handed to. */
interface ActiveRound {
  reply(reply: PushPullReply): void;
  broken(err: unknown): void;
}

/**
 * A trainer's `Steps` stream to one shard: push-pull rounds one after another on one long-lived
 * call, so a step pays no call setup (see the proto). A refused round fails with the error the
 * per-call `PushPull` would have failed with, and the stream serves the next round. Anything
 * else that ends a round early (the stream failing or ending, a timeout, a bad reply, a wait cut
 * by the round's signal) resets the stream: it is cancelled and `usable` turns false, so the
 * next round needs a new one.
 */
export class StepStream {
  private readonly call: ClientDuplexStream<PushChunk, PushPullReply>;
  private nextRound = 1;
  private active?: ActiveRound;
  private ended = false;

  constructor(
    open: () => ClientDuplexStream<PushChunk, PushPullReply>,
    /** The shard, named in errors. */
    private readonly shard: number,
  ) {
    this.call = open();
    this.call.on('data', (reply: PushPullReply) => this.onReply(reply));
    this.call.on('error', (err: ServiceError) => this.onBroken(err));
    this.call.on('end', () => this.onBroken(streamEnded()));
  }

  /** False once the stream failed, ended or was reset. */
  get usable(): boolean {
    return !this.ended;
  }

  /** True while a round is in progress. */
  get busy(): boolean {
    return this.active !== undefined;
  }

  /** Runs one round (one at a time); resolves as the per-call `PushPull` would have. */
  run({ chunks, pushedVersion, timeoutMs, signal, onSent }: StepRound): Promise<PushPullResult> {
    if (this.active) return Promise.reject(new Error('a step stream runs one round at a time'));
    if (this.ended) return Promise.reject(fromServiceError(streamEnded(), this.shard, pushedVersion));
    const round = this.nextRound++;
    return new Promise((resolve, reject) => {
      const assembler = new TensorAssembler();
      let push: PushReply | undefined;
      let params: { version: number; expected: number } | undefined;
      let first: PushChunk | undefined;
      let writing = true;
      const settle = () => {
        this.active = undefined;
        writing = false;
        clearTimeout(timer);
        signal?.removeEventListener('abort', stopWaiting);
      };
      const fail = (err: unknown, reset: boolean) => {
        settle();
        if (reset) this.reset();
        reject(fromServiceError(err, this.shard, pushedVersion));
      };
      const succeed = (result: PushPullResult, reset = false) => {
        settle();
        if (reset) this.reset();
        resolve(result);
      };
      // The push was taken; only the wait for the parameters is cut, which resets the stream.
      const stopWaiting = () => {
        if (push !== undefined) succeed({ push }, true);
      };
      const timer = setTimeout(() => fail(deadlineExceeded(timeoutMs, round), true), timeoutMs);
      signal?.addEventListener('abort', stopWaiting);
      this.active = {
        broken: (err) => fail(err, false),
        reply: (reply) => {
          try {
            if (reply.round !== round)
              throw new Error(`step stream: a reply of round ${reply.round} in round ${round}`);
            if (reply.statusCode !== GrpcStatus.OK) {
              // The shard refused the push at once; it reads the rest of the round until `last`.
              if (writing && first) this.call.write({ ...first, tensor: undefined, round, last: true });
              fail(refusalOf(reply), false);
              return;
            }
            push ??= { version: reply.pushVersion, accepted: reply.accepted };
            if (signal?.aborted) {
              stopWaiting();
              return;
            }
            if (reply.withParams) {
              params = { version: reply.version, expected: reply.tensorCount };
              if (reply.tensor) assembler.add(reply.tensor);
            }
            if (!reply.roundDone) return;
            if (params === undefined) {
              succeed({ push });
              return;
            }
            const tensors = assembler.finish().map(toNamedTensor);
            if (tensors.length !== params.expected) {
              throw new Error(`push-pull ended with ${tensors.length} of ${params.expected} tensors`);
            }
            succeed({ push, params: { version: params.version, tensors } });
          } catch (err) {
            fail(err, true);
          }
        },
      };
      // Each chunk is written with the next one read, so that the last is marked.
      let next: IteratorResult<PushChunk> | undefined;
      const pump = (): void => {
        try {
          next ??= chunks.next();
          while (writing && !next.done) {
            const chunk: PushChunk = { ...next.value, round, last: false };
            first ??= chunk;
            next = chunks.next();
            chunk.last = next.done === true;
            if (chunk.last) writing = false;
            if (!this.call.write(chunk, chunk.last ? onSent : undefined) && writing) {
              this.call.once('drain', pump);
              return;
            }
          }
        } catch (err) {
          fail(err, true);
        }
      };
      pump();
    });
  }

  /** Ends the stream: half-closes an idle one, cancels one with a round in progress. */
  close(): void {
    if (this.ended) return;
    if (this.active) {
      this.reset();
      return;
    }
    this.ended = true;
    this.call.end();
  }

  private onReply(reply: PushPullReply): void {
    if (this.active) this.active.reply(reply);
    else this.reset();
  }

  private onBroken(err: unknown): void {
    this.ended = true;
    this.active?.broken(err);
  }

  private reset(): void {
    this.ended = true;
    this.call.cancel();
  }
}

/** The error a refused round carries in-band, as the per-call `PushPull` would have failed. */
function refusalOf(reply: PushPullReply): ServiceError {
  const metadata = new Metadata();
  if (reply.statusReason !== '') metadata.set(ERROR_REASON_METADATA_KEY, reply.statusReason);
  if (reply.statusReason === 'stale-gradient') {
    metadata.set(SHARD_VERSION_METADATA_KEY, String(reply.statusShardVersion));
  }
  return serviceError(reply.statusCode, reply.statusMessage, metadata);
}

/** A round that outlived its time, failing as a call past its deadline does. */
function deadlineExceeded(timeoutMs: number, round: number): ServiceError {
  return serviceError(
    GrpcStatus.DEADLINE_EXCEEDED,
    `Deadline exceeded after ${(timeoutMs / 1000).toFixed(3)}s (step stream round ${round})`,
  );
}

/** The shard ended the stream (it is stopping) with no round answered: it is away. */
function streamEnded(): ServiceError {
  return serviceError(GrpcStatus.UNAVAILABLE, 'the shard ended the step stream');
}

function serviceError(code: GrpcStatus, details: string, metadata = new Metadata()): ServiceError {
  return Object.assign(new Error(`${code} ${GrpcStatus[code]}: ${details}`), { code, details, metadata });
}
