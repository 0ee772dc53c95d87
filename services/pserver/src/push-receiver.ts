import { TensorAssembler, float32Values, type DataType, type PushChunk, type PushReply } from '#libs/pserver-protocol';
import { InvalidRequestError } from './errors.js';
import type { JobShard } from './job-shard.js';
import type { ParameterShard } from './parameter-shard.js';
import { requestedParamsType } from './push-validation.js';

/** The fields every chunk of a push repeats. */
export interface PushHeader {
  jobId: string;
  trainerId: string;
  version: number;
  samples: number;
  pullWaitMs: number;
  pullDtype: DataType;
}

/** A push taken by its job: what the shard answered, and what a push-pull's parameters travel in. */
export interface TakenPush {
  job: JobShard;
  header: PushHeader;
  reply: PushReply;
  paramsType: DataType;
}

/**
 * Takes in the chunks of one push, checking each as it comes (a stale push is refused at its
 * first chunk, before megabytes of it are read), and hands the gradients, decoded to float32
 * from the dtype each tensor says, to the job at `finish`. Any check that fails throws a
 * `ShardError` or `MalformedTensorError`; the job changes only at `finish`.
 */
export class PushReceiver {
  private job?: JobShard;
  private header?: PushHeader;
  private assembler?: TensorAssembler;

  constructor(
    private readonly shard: ParameterShard,
    /** The RPC, named in the refusal of an empty push. */
    private readonly method: string,
  ) {}

  /** Takes one chunk of the push. */
  async add(chunk: PushChunk): Promise<void> {
    if (!this.header) {
      this.header = {
        jobId: chunk.jobId,
        trainerId: chunk.trainerId,
        version: chunk.version,
        samples: chunk.samples,
        pullWaitMs: chunk.pullWaitMs,
        pullDtype: chunk.pullDtype,
      };
      requestedParamsType(chunk.pullDtype, 'pull_dtype');
      const job = await this.shard.job(chunk.jobId);
      job.checkPushVersion(chunk.version);
      this.assembler = new TensorAssembler((name, dtype, shape) => job.expectGradient(name, dtype, shape));
      this.job = job;
    } else {
      sameHeader(this.header, chunk);
    }
    if (chunk.tensor) this.assembler!.add(chunk.tensor);
  }

  /** Pushes the gradients received to the job. */
  finish(): TakenPush {
    const { job, header, assembler } = this;
    if (!job || !header || !assembler) throw new InvalidRequestError(this.method, 'the stream carried no chunk');
    const gradients = new Map(assembler.finish().map((t) => [t.name, float32Values(t)]));
    return {
      job,
      header,
      reply: job.push(header.trainerId, header.version, header.samples, gradients),
      paramsType: requestedParamsType(header.pullDtype, 'pull_dtype'),
    };
  }
}

/** Every chunk of a stream must repeat the first chunk's header fields. */
export function sameHeader<H extends object>(header: H, chunk: H): void {
  for (const key of Object.keys(header) as (keyof H & string)[]) {
    if (header[key] !== chunk[key]) {
      throw new InvalidRequestError(
        key,
        `changed within the stream from ${JSON.stringify(header[key])} to ${JSON.stringify(chunk[key])}`,
      );
    }
  }
}
