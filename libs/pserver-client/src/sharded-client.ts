import { status as GrpcStatus } from '@grpc/grpc-js';
import {
  DataType,
  type BeginInitReply,
  type SaveReply,
  type StatusReply,
  type TensorInfo,
} from '#proto/generated/pserver.js';
import { retryWithBackoff, sleep } from '#libs/retry';
import {
  MalformedTensorError,
  PserverError,
  PserverTimeoutError,
  PserverUnavailableError,
  ShardCallError,
  StaleGradientError,
  fromServiceError,
} from './errors.js';
import { DEFAULT_PULL_WAIT_MS } from './grpc-options.js';
import { PserverClient, type PserverClientOptions, type PulledShard } from './pserver-client.js';
import {
  ADDRESS_WAIT_MS,
  ShardAddressTimeoutError,
  StaticShardDirectory,
  type ShardDirectory,
} from './shard-directory.js';
import { assignShards, type ShardMap } from './sharding.js';
import { elementCount, sameShape, type NamedTensor } from './tensor-codec.js';

/** How often `waitInitialized` asks again while another trainer initialises. */
export const INIT_POLL_MS = 250;
/** How long `waitInitialized` waits for the parameters before giving up. */
export const INIT_WAIT_MS = 10 * 60_000;
/**
 * How long calls keep retrying a shard that cannot be reached or is shutting down: it may be
 * restarting, or a standby may be taking it over (after the lease TTL when the old owner's
 * machine is gone).
 */
export const UNAVAILABLE_RETRY_MS = 60_000;
/** First pause before a call to an unreachable shard is tried again; doubles per retry. */
export const UNAVAILABLE_BACKOFF_MS = 100;
/** Longest pause between retries of a call to an unreachable shard. */
export const UNAVAILABLE_MAX_BACKOFF_MS = 2_000;

/** Name and shape of one model parameter. */
export interface ParamInfo {
  name: string;
  shape: readonly number[];
}

/** A parameter or gradient as the learner hands it over; `data` must be a `Float32Array`. */
export interface TensorLike {
  name: string;
  shape: readonly number[];
  data: ArrayBufferView;
}

/** A parameter as pulled: float32, ready for `Learner.setParams`. */
export interface ParamTensor {
  name: string;
  dtype: 'float32';
  shape: number[];
  data: Float32Array;
}

/** Settings of a `ShardedPserverClient`. */
export interface ShardedPserverClientOptions {
  jobId: string;
  trainerId: string;
  /** Every parameter of the model, in the learner's fixed order. */
  params: readonly ParamInfo[];
  /** Where the shards are. */
  directory: ShardDirectory;
  /** Options of each shard's client. */
  client?: Omit<PserverClientOptions, 'shard'>;
  /** How long a call waits for an unregistered shard's address. Default `ADDRESS_WAIT_MS`. */
  addressWaitMs?: number;
  /** How long idempotent calls retry an unreachable shard. Default `UNAVAILABLE_RETRY_MS`. */
  unavailableRetryMs?: number;
}

/** The outcome of `beginInit` over every shard. */
export interface InitElection {
  /** This trainer must send the parameters (shard 0's answer). */
  elected: boolean;
  /** Every shard already has the parameters. */
  initialized: boolean;
  /** Each shard's version. */
  versions: number[];
  /** Who holds the init lease on shard 0, if anyone. */
  leaseHolder: string;
}

/** The outcome of a push to every shard. */
export interface PushOutcome {
  /** Each shard's version after the push (or, for a stale push, the version that refused it). */
  versions: number[];
  /** Whether each shard took the gradients (false: a duplicate for a version already pushed). */
  accepted: boolean[];
  /** The shards that refused the push as stale; pull again and recompute for them. */
  stale: StaleGradientError[];
}

/** The whole model as pulled from every shard. */
export interface PulledParams {
  /** Every parameter, in the learner's fixed order. */
  tensors: ParamTensor[];
  /** Each shard's version. */
  versions: number[];
  /** The lowest shard version (all equal when `consistent`). */
  version: number;
  /** Every shard reported the same version. */
  consistent: boolean;
}

/** What `pullParams` may be told. */
export interface ShardedPullOptions {
  /** How long each shard waits for its minimum version. Default `DEFAULT_PULL_WAIT_MS`. */
  waitMs?: number;
  /**
   * Pull lagging shards again until every shard reports the same version (synchronous
   * training). Default true; off, the versions are returned as they come.
   */
  sameVersion?: boolean;
  /** Pull this retained snapshot from every shard instead of the live parameters. */
  snapshotVersion?: number;
  /** Stops retrying a shard that is away once aborted (a pull in progress is not cut). */
  signal?: AbortSignal;
}

/** What `pushGradients` may be told. */
export interface ShardedPushOptions {
  /** Stops retrying a shard that is away once aborted (a push in progress is not cut). */
  signal?: AbortSignal;
}

/**
 * The parameter servers of one job seen as one: splits parameters and gradients by the shard map
 * (`assignShards` over the learner's parameter list), calls every shard concurrently, and puts
 * pulled tensors back in the learner's order. Shard addresses come from a `ShardDirectory`, so
 * a shard restarted elsewhere is followed.
 *
 * A shard that cannot be reached or is shutting down (it is restarting, or a standby is taking
 * over) is retried with backoff for up to `unavailableRetryMs`, by every call: the others are
 * idempotent, and a push is too in synchronous mode (a shard takes one push per trainer and
 * version; in asynchronous mode a push whose answer was lost may be applied twice, which SGD
 * does not notice). Only the failed shards are called again. A restarted shard answers at the
 * version it had (see the pserver's `job-shard.ts`), so a retried push for that version is
 * taken, and one it has passed is refused as stale as usual.
 */
export class ShardedPserverClient {
  /** Which shard holds which parameter. */
  readonly shardMap: ShardMap;
  private readonly jobId: string;
  private readonly trainerId: string;
  private readonly params: readonly ParamInfo[];
  private readonly manifest: TensorInfo[];
  private readonly directory: ShardDirectory;
  private readonly clients = new Map<number, PserverClient>();
  private readonly initializedShards = new Set<number>();
  private readonly initVersions: number[] = [];
  private readonly stopWatching: () => void;
  private specJson = '';

  constructor(private readonly options: ShardedPserverClientOptions) {
    this.jobId = options.jobId;
    this.trainerId = options.trainerId;
    this.params = options.params;
    this.directory = options.directory;
    this.shardMap = assignShards(
      options.params.map((p) => ({ name: p.name, size: elementCount(p.shape) })),
      this.directory.shardCount,
    );
    this.manifest = options.params.map((p) => ({ name: p.name, dtype: DataType.FLOAT32, shape: [...p.shape] }));
    this.stopWatching = this.directory.onChange((shard) => {
      this.clients.get(shard)?.close();
      this.clients.delete(shard);
    });
  }

  /** A client over fixed addresses, shard k at index k (no NATS). */
  static fromAddresses(
    addresses: readonly string[],
    options: Omit<ShardedPserverClientOptions, 'directory'>,
  ): ShardedPserverClient {
    return new ShardedPserverClient({ ...options, directory: new StaticShardDirectory(addresses) });
  }

  /** Number of shards. */
  get shardCount(): number {
    return this.directory.shardCount;
  }

  /**
   * Asks every shard to initialise the job with `specJson`. Shard 0 answers first and decides
   * the election; the other shards only learn the spec and the parameter list.
   */
  async beginInit(specJson: string): Promise<InitElection> {
    this.specJson = specJson;
    const request = (shard: number) =>
      this.retrying(shard, (c) =>
        c.beginInit({
          jobId: this.jobId,
          trainerId: this.trainerId,
          specJson,
          params: this.manifest,
          shardCount: this.shardCount,
        }),
      );
    const first = await request(0);
    const rest = await this.everyShard('beginInit', (k) => request(k), 1);
    const replies: BeginInitReply[] = [first, ...rest];
    replies.forEach((r, k) => {
      if (r.initialized) this.initializedShards.add(k);
      this.initVersions[k] = r.version;
    });
    return {
      elected: first.elected,
      initialized: replies.every((r) => r.initialized),
      versions: replies.map((r) => r.version),
      leaseHolder: first.leaseHolder,
    };
  }

  /**
   * Sends every parameter to its shard (the elected trainer only). Shards that were already
   * initialised when `beginInit` last asked are skipped.
   */
  async initParams(params: readonly TensorLike[]): Promise<void> {
    const byShard = this.split(params, 'initParams');
    await this.everyShard('initParams', async (k) => {
      if (this.initializedShards.has(k)) return;
      if (byShard[k].length === 0) return;
      await (await this.client(k)).initParams(this.jobId, this.trainerId, byShard[k]);
    });
  }

  /** Marks every shard initialised; returns their versions (0 unless restored from a checkpoint). */
  async finishInit(): Promise<number[]> {
    const versions = await this.everyShard('finishInit', async (k) => {
      if (this.initializedShards.has(k)) return this.initVersions[k] ?? 0;
      return (await this.retrying(k, (c) => c.finishInit(this.jobId, this.trainerId))).version;
    });
    versions.forEach((_, k) => this.initializedShards.add(k));
    return versions;
  }

  /**
   * Waits until every shard has the parameters, asking again every `pollMs`. Resolves
   * `'elected'` instead when the trainer that was initialising lost its lease and this one was
   * elected in its place; the caller must then `initParams` and `finishInit`.
   */
  async waitInitialized(options: { pollMs?: number; timeoutMs?: number } = {}): Promise<'initialized' | 'elected'> {
    const deadline = Date.now() + (options.timeoutMs ?? INIT_WAIT_MS);
    for (;;) {
      const election = await this.beginInit(this.specJson);
      if (election.initialized) return 'initialized';
      if (election.elected) return 'elected';
      if (Date.now() > deadline) {
        throw new PserverTimeoutError(
          `job ${this.jobId}: parameters not initialised within ${options.timeoutMs ?? INIT_WAIT_MS} ms` +
            (election.leaseHolder ? ` (lease held by ${election.leaseHolder})` : ''),
          0,
          GrpcStatus.DEADLINE_EXCEEDED,
          'init-timeout',
        );
      }
      await sleep(options.pollMs ?? INIT_POLL_MS);
    }
  }

  /**
   * The whole initialisation: takes part in the election, and either sends `makeParams()` (when
   * elected, also after a lease takeover) or waits for the trainer that does. A trainer that
   * loses its lease half-way goes back to waiting.
   */
  async initialize(
    specJson: string,
    makeParams: () => readonly TensorLike[] | Promise<readonly TensorLike[]>,
    options: { pollMs?: number; timeoutMs?: number } = {},
  ): Promise<{ elected: boolean }> {
    const election = await this.beginInit(specJson);
    if (election.initialized) return { elected: false };
    let elected = election.elected;
    for (;;) {
      if (!elected && (await this.waitInitialized(options)) === 'initialized') return { elected: false };
      try {
        await this.initParams(await makeParams());
        await this.finishInit();
        return { elected: true };
      } catch (err) {
        const lost =
          err instanceof ShardCallError &&
          err.errors.some((e) => e?.reason === 'init-lease' || e?.reason === 'already-initialized');
        if (!lost) throw err;
        elected = false;
      }
    }
  }

  /** Joins the quorum of every shard. */
  async join(): Promise<{ versions: number[]; countedFrom: number[] }> {
    const replies = await this.everyShard('join', (k) => this.retrying(k, (c) => c.join(this.jobId, this.trainerId)));
    return { versions: replies.map((r) => r.version), countedFrom: replies.map((r) => r.countedFromVersion) };
  }

  /** Leaves the quorum of every shard. */
  async leave(): Promise<void> {
    await this.everyShard('leave', (k) => this.retrying(k, (c) => c.leave(this.jobId, this.trainerId)));
  }

  /**
   * Pushes gradients (any order, every parameter) to every shard at once. `versions` is the
   * version vector the gradients were computed from (or one version for all shards). A shard
   * that is away is pushed to again when it is back (see the class comment). Stale refusals
   * are returned in the outcome; any other failure rejects with a `ShardCallError`.
   */
  async pushGradients(
    versions: number | readonly number[],
    samples: number,
    gradients: readonly TensorLike[],
    options: ShardedPushOptions = {},
  ): Promise<PushOutcome> {
    const versionOf = (k: number) => (typeof versions === 'number' ? versions : versions[k]);
    const byShard = this.split(gradients, 'pushGradients');
    const settled = await Promise.allSettled(
      byShard.map((grads, k) =>
        this.retrying(
          k,
          (c) =>
            c.pushGradients({
              jobId: this.jobId,
              trainerId: this.trainerId,
              version: versionOf(k),
              samples,
              gradients: grads,
            }),
          options.signal,
        ),
      ),
    );
    const outcome: PushOutcome = { versions: [], accepted: [], stale: [] };
    const errors: (PserverError | undefined)[] = [];
    settled.forEach((r, k) => {
      if (r.status === 'fulfilled') {
        outcome.versions[k] = r.value.version;
        outcome.accepted[k] = r.value.accepted;
        return;
      }
      const err = fromServiceError(r.reason, k, versionOf(k));
      outcome.accepted[k] = false;
      if (err instanceof StaleGradientError) {
        outcome.versions[k] = err.shardVersion;
        outcome.stale.push(err);
      } else {
        errors[k] = err;
      }
    });
    if (errors.some((e) => e)) throw new ShardCallError('pushGradients', errors);
    return outcome;
  }

  /**
   * Pulls every shard's parameters, each at least at its minimum version (one number for all
   * shards, or a vector), and returns them in the learner's order. With `sameVersion`, lagging
   * shards are pulled again at the highest version seen, so a synchronous step that has reached
   * only some shards is not mixed with the previous one.
   */
  async pullParams(
    minVersion: number | readonly number[] = 0,
    options: ShardedPullOptions = {},
  ): Promise<PulledParams> {
    const waitMs = options.waitMs ?? DEFAULT_PULL_WAIT_MS;
    const pull = (k: number, min: number) =>
      this.retrying(
        k,
        (c) =>
          c.pullParams(this.jobId, {
            minVersion: min,
            waitMs,
            snapshotVersion: options.snapshotVersion,
            trainerId: this.trainerId,
          }),
        options.signal,
      );
    const minOf = (k: number) => (typeof minVersion === 'number' ? minVersion : (minVersion[k] ?? 0));
    const shards: PulledShard[] = await this.everyShard('pullParams', (k) => pull(k, minOf(k)));
    let consistent = shards.every((s) => s.version === shards[0].version);
    if (!consistent && (options.sameVersion ?? true) && options.snapshotVersion === undefined) {
      const target = Math.max(...shards.map((s) => s.version));
      try {
        await this.everyShard('pullParams', async (k) => {
          if (shards[k].version < target) shards[k] = await pull(k, target);
        });
        consistent = shards.every((s) => s.version === target);
      } catch (err) {
        if (!(err instanceof ShardCallError) || !err.errors.every((e) => !e || e instanceof PserverTimeoutError)) {
          throw err;
        }
      }
    }
    const versions = shards.map((s) => s.version);
    return { tensors: this.inOrder(shards), versions, version: Math.min(...versions), consistent };
  }

  /** Checkpoints every shard (to `path`/shard-<k> when given). */
  save(path?: string): Promise<SaveReply[]> {
    return this.everyShard('save', async (k) =>
      (await this.client(k)).save(this.jobId, path ? `${path.replace(/\/$/, '')}/shard-${k}` : ''),
    );
  }

  /** Every shard's status of this job. */
  status(): Promise<StatusReply[]> {
    return this.everyShard('status', (k) => this.retrying(k, (c) => c.status(this.jobId)));
  }

  /** Closes every channel and stops following the directory (the directory stays open). */
  close(): void {
    this.stopWatching();
    for (const c of this.clients.values()) c.close();
    this.clients.clear();
  }

  private async client(shard: number, waitMs = this.options.addressWaitMs ?? ADDRESS_WAIT_MS): Promise<PserverClient> {
    const known = this.clients.get(shard);
    if (known) return known;
    const address = await this.directory.waitForAddress(shard, waitMs);
    const existing = this.clients.get(shard);
    if (existing) return existing;
    const client = new PserverClient(address, { ...this.options.client, shard });
    this.clients.set(shard, client);
    return client;
  }

  /**
   * Runs a call, retrying while the shard is unreachable, unregistered or shutting down (it may
   * be restarting, maybe elsewhere: each try asks the directory for the current address),
   * until the budget is spent or `signal` aborts; then the last error is thrown.
   */
  private async retrying<T>(shard: number, call: (c: PserverClient) => Promise<T>, signal?: AbortSignal): Promise<T> {
    const deadline = Date.now() + (this.options.unavailableRetryMs ?? UNAVAILABLE_RETRY_MS);
    return retryWithBackoff(
      async () => {
        try {
          const addressWaitMs = Math.min(
            this.options.addressWaitMs ?? ADDRESS_WAIT_MS,
            Math.max(1, deadline - Date.now()),
          );
          return await call(await this.client(shard, addressWaitMs));
        } catch (err) {
          throw err instanceof ShardAddressTimeoutError
            ? new PserverUnavailableError(err.message, shard, GrpcStatus.UNAVAILABLE, '', { cause: err })
            : fromServiceError(err, shard);
        }
      },
      {
        initialDelayMs: UNAVAILABLE_BACKOFF_MS,
        maxDelayMs: UNAVAILABLE_MAX_BACKOFF_MS,
        signal,
        shouldRetry: (e, delayMs) =>
          isTransient(e as PserverError) && Date.now() + delayMs <= deadline && !signal?.aborted,
      },
    );
  }

  /** Runs `fn` for every shard from `from` on, concurrently; any failure is a `ShardCallError`. */
  private async everyShard<T>(operation: string, fn: (shard: number) => Promise<T>, from = 0): Promise<T[]> {
    const shards = Array.from({ length: this.shardCount - from }, (_, i) => i + from);
    const settled = await Promise.allSettled(shards.map(fn));
    const errors: (PserverError | undefined)[] = [];
    settled.forEach((r, i) => {
      if (r.status === 'rejected') errors[shards[i]] = fromServiceError(r.reason, shards[i]);
    });
    if (errors.some((e) => e)) throw new ShardCallError(operation, errors);
    return settled.map((r) => (r as PromiseFulfilledResult<T>).value);
  }

  /** Groups tensors by shard, refusing names outside the model and non-float32 data. */
  private split(tensors: readonly TensorLike[], operation: string): NamedTensor[][] {
    const byShard: NamedTensor[][] = Array.from({ length: this.shardCount }, () => []);
    for (const t of tensors) {
      if (!this.shardMap.has(t.name)) {
        throw new MalformedTensorError(t.name, `${operation}: not a parameter of the model`);
      }
      if (!(t.data instanceof Float32Array)) {
        throw new MalformedTensorError(t.name, `${operation}: only float32 tensors are trainable`);
      }
      byShard[this.shardMap.shardOf(t.name)].push({ name: t.name, shape: t.shape, data: t.data });
    }
    return byShard;
  }

  private inOrder(shards: readonly PulledShard[]): ParamTensor[] {
    const byName = new Map<string, { shard: number; tensor: PulledShard['tensors'][number] }>();
    shards.forEach((s, k) => s.tensors.forEach((t) => byName.set(t.name, { shard: k, tensor: t })));
    return this.params.map((p) => {
      const found = byName.get(p.name);
      const shard = this.shardMap.shardOf(p.name);
      if (!found) {
        throw new PserverError(
          `shard ${shard} returned no parameter "${p.name}"`,
          shard,
          GrpcStatus.INTERNAL,
          'missing-param',
        );
      }
      const { tensor } = found;
      if (!(tensor.data instanceof Float32Array) || !sameShape(tensor.shape, p.shape)) {
        throw new PserverError(
          `shard ${found.shard} returned "${p.name}" as [${tensor.shape.join(', ')}], expected float32 [${p.shape.join(', ')}]`,
          found.shard,
          GrpcStatus.INTERNAL,
          'unexpected-param',
        );
      }
      return { name: p.name, dtype: 'float32', shape: [...tensor.shape], data: tensor.data };
    });
  }
}

/**
 * The shard is away, not refusing: unreachable (no reason from a server), shutting down
 * (`closing`), or its channel was closed under the call because its address changed.
 */
function isTransient(e: PserverError): boolean {
  if (e instanceof PserverUnavailableError) return e.reason === '' || e.reason === 'closing';
  return e.code === GrpcStatus.CANCELLED && e.reason === '';
}
