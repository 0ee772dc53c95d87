import {
  DataType,
  assignShards,
  elementCount,
  type SaveReply,
  type ShardMap,
  type StatusReply,
} from '#libs/pserver-protocol';
import {
  PserverTimeoutError,
  ShardCallError,
  StaleGradientError,
  fromServiceError,
  type PserverError,
} from './errors.js';
import { DEFAULT_PULL_WAIT_MS } from './call-deadlines.js';
import { InitElectionProtocol, type InitElection } from './init-election.js';
import { ParamPartition } from './param-partition.js';
import type {
  PserverClient,
  PserverClientOptions,
  PulledShard,
  PushPullResult,
  PushRequest,
} from './pserver-client.js';
import { ShardClients } from './shard-clients.js';
import { StaticShardDirectory, type ShardDirectory } from './shard-directory.js';
import {
  everyShard,
  inLearnerOrder,
  splitByShard,
  type ParamInfo,
  type ParamTensor,
  type TensorLike,
} from './shard-fanout.js';

/**
 * How many times `join` asks the shards again to count the trainer from one version; each round
 * settles it unless a shard readmitted the trainer in between.
 */
const MAX_JOIN_ALIGNMENTS = 3;

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
  /**
   * Large parameters are cut into blocks of at least `minElements` spread over the shards
   * (`param-partition.ts`; the job's `pservers.partition`). Absent: every parameter whole.
   */
  partition?: { minElements: number };
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

/** What `pushPull` may be told besides `ShardedPushOptions`. */
export interface ShardedPushPullOptions extends ShardedPushOptions {
  /** How long each shard waits for the parameters to send back. */
  waitMs: number;
  /** Synchronous training: parameters count only when every shard sent the same version. */
  sameVersion: boolean;
  /**
   * Called once every shard's part of the push was handed to its connection (at most once; not
   * when a part failed or was refused before it was all written).
   */
  onSent?: () => void;
}

/**
 * The parameter servers of one job seen as one: splits parameters and gradients by the shard map
 * (`assignShards` over the learner's parameter list), calls every shard concurrently
 * (`shard-fanout.ts`), and puts pulled tensors back in the learner's order. Shard addresses come
 * from a `ShardDirectory`, so a shard restarted elsewhere is followed (`shard-clients.ts`); the
 * init election is `init-election.ts`.
 *
 * A shard that cannot be reached or is shutting down (it is restarting, or a standby is taking
 * over) is retried with backoff for up to `unavailableRetryMs` (`unavailable-retry.ts`), by
 * every call: the others are idempotent, and a push is too in synchronous mode (a shard takes
 * one push per trainer and version; in asynchronous mode a push whose answer was lost may be
 * applied twice, which SGD does not notice). Only the failed shards are called again. A
 * restarted shard answers at the version it had (see the pserver's `shard-recovery.ts`), so a
 * retried push for that version is taken, and one it has passed is refused as stale as usual.
 */
export class ShardedPserverClient {
  /** Which shard holds which block of a parameter (a whole parameter is one block). */
  readonly shardMap: ShardMap;
  private readonly jobId: string;
  private readonly trainerId: string;
  private readonly partition: ParamPartition;
  /** The blocks the shards hold, in the model's order. */
  private readonly parts: readonly ParamInfo[];
  private readonly shards: ShardClients;
  private readonly init: InitElectionProtocol;

  constructor(options: ShardedPserverClientOptions) {
    this.jobId = options.jobId;
    this.trainerId = options.trainerId;
    const shardCount = options.directory.shardCount;
    this.partition = new ParamPartition(options.params, shardCount, options.partition?.minElements ?? 0);
    this.parts = this.partition.parts;
    this.shardMap = assignShards(
      this.parts.map((p) => ({ name: p.name, size: elementCount(p.shape) })),
      shardCount,
    );
    this.shards = new ShardClients(options.directory, options);
    this.init = new InitElectionProtocol(this.shards, {
      jobId: options.jobId,
      trainerId: options.trainerId,
      manifest: this.parts.map((p) => ({ name: p.name, dtype: DataType.FLOAT32, shape: [...p.shape] })),
      shardMap: this.shardMap,
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
    return this.shards.shardCount;
  }

  /** Takes part in the election on every shard; see `InitElectionProtocol.beginInit`. */
  beginInit(specJson: string): Promise<InitElection> {
    return this.init.beginInit(specJson);
  }

  /** Sends every parameter to its shard (the elected trainer only); see `InitElectionProtocol`. */
  initParams(params: readonly TensorLike[]): Promise<void> {
    return this.init.initParams(this.partition.split(params, 'initParams'));
  }

  /** Marks every shard initialised; returns their versions (0 unless restored from a checkpoint). */
  finishInit(): Promise<number[]> {
    return this.init.finishInit();
  }

  /** Waits until every shard has the parameters, or this trainer is elected in another's place. */
  waitInitialized(options: { pollMs?: number; timeoutMs?: number } = {}): Promise<'initialized' | 'elected'> {
    return this.init.waitInitialized(options);
  }

  /**
   * The whole initialisation: takes part in the election, and either sends `makeParams()` (when
   * elected, also after a lease takeover) or waits for the trainer that does.
   */
  initialize(
    specJson: string,
    makeParams: () => readonly TensorLike[] | Promise<readonly TensorLike[]>,
    options: { pollMs?: number; timeoutMs?: number } = {},
  ): Promise<{ elected: boolean }> {
    return this.init.initialize(specJson, async () => this.partition.split(await makeParams(), 'initParams'), options);
  }

  /**
   * Joins the quorum of every shard, counted from the same version on each. A shard counts a
   * newcomer from the version after its open one, and the shards can be a version apart at that
   * moment; counted from 9 on one and 10 on the other, the trainer's first pull (which wants one
   * version on every shard) would wait for a step that waits for the trainer itself, and every
   * later step would mix parameters of two versions. So when the shards answer different versions,
   * each is asked again to count it from the latest of them (never earlier than it already does).
   */
  async join(): Promise<{ versions: number[]; countedFrom: number[] }> {
    const joinEvery = (atLeast: number) =>
      this.everyShard('join', (k) => this.shards.retrying(k, (c) => c.join(this.jobId, this.trainerId, atLeast)));
    let replies = await joinEvery(0);
    for (let tries = 0; tries < MAX_JOIN_ALIGNMENTS; tries++) {
      const counted = replies.map((r) => r.countedFromVersion);
      if (counted.every((v) => v === counted[0])) break;
      // A shard that readmitted the trainer in between may answer a later version: asked again.
      replies = await joinEvery(Math.max(...counted));
    }
    return { versions: replies.map((r) => r.version), countedFrom: replies.map((r) => r.countedFromVersion) };
  }

  /** Leaves the quorum of every shard. */
  async leave(): Promise<void> {
    await this.everyShard('leave', (k) => this.shards.retrying(k, (c) => c.leave(this.jobId, this.trainerId)));
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
    const { outcome } = await this.pushToEvery(versions, samples, gradients, options, async (c, request) => ({
      push: await c.pushGradients(request),
    }));
    return outcome;
  }

  /**
   * `pushGradients`, and in the same call to each shard the parameters this trainer needs next
   * (see `PserverClient.pushPull`), each shard waiting up to `waitMs` for them (`signal` ends
   * the wait once a shard took the push). `params` is
   * undefined unless every shard took the push and sent them; with `sameVersion` (synchronous
   * training), also unless every shard sent the same version. Then pull as usual.
   */
  async pushPull(
    versions: number | readonly number[],
    samples: number,
    gradients: readonly TensorLike[],
    options: ShardedPushPullOptions,
  ): Promise<PushOutcome & { params?: PulledParams }> {
    const written = new Set<number>();
    const { onSent } = options;
    const shardSent = (k: number) => {
      written.add(k);
      if (written.size === this.shardMap.shardCount) onSent?.();
    };
    const { outcome, results } = await this.pushToEvery(versions, samples, gradients, options, (c, request, k) =>
      c.pushPull(request, options.waitMs, options.signal, onSent && (() => shardSent(k))),
    );
    if (outcome.stale.length > 0) return outcome;
    const shards = results.map((r) => r?.params);
    if (!shards.every((s): s is PulledShard => s !== undefined)) return outcome;
    const pulledVersions = shards.map((s) => s.version);
    const consistent = pulledVersions.every((v) => v === pulledVersions[0]);
    if (options.sameVersion && !consistent) return outcome;
    return {
      ...outcome,
      params: {
        tensors: this.inLearnerOrder(shards),
        versions: pulledVersions,
        version: Math.min(...pulledVersions),
        consistent,
      },
    };
  }

  /**
   * Pushes each shard its part of the gradients with `call`, at once, retrying shards that are
   * away (see the class comment). Stale refusals are gathered in the outcome; any other failure
   * rejects with a `ShardCallError`.
   */
  private async pushToEvery(
    versions: number | readonly number[],
    samples: number,
    gradients: readonly TensorLike[],
    options: ShardedPushOptions,
    call: (client: PserverClient, request: PushRequest, shard: number) => Promise<PushPullResult>,
  ): Promise<{ outcome: PushOutcome; results: (PushPullResult | undefined)[] }> {
    const versionOf = (k: number) => (typeof versions === 'number' ? versions : versions[k]);
    const byShard = splitByShard(this.shardMap, this.partition.split(gradients, 'pushGradients'), 'pushGradients');
    const settled = await Promise.allSettled(
      byShard.map((grads, k) =>
        this.shards.retrying(
          k,
          (c) =>
            call(
              c,
              {
                jobId: this.jobId,
                trainerId: this.trainerId,
                version: versionOf(k),
                samples,
                gradients: grads,
              },
              k,
            ),
          options.signal,
        ),
      ),
    );
    const outcome: PushOutcome = { versions: [], accepted: [], stale: [] };
    const results: (PushPullResult | undefined)[] = [];
    const errors: (PserverError | undefined)[] = [];
    settled.forEach((r, k) => {
      if (r.status === 'fulfilled') {
        outcome.versions[k] = r.value.push.version;
        outcome.accepted[k] = r.value.push.accepted;
        results[k] = r.value;
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
    return { outcome, results };
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
      this.shards.retrying(
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
    return {
      tensors: this.inLearnerOrder(shards),
      versions,
      version: Math.min(...versions),
      consistent,
    };
  }

  /** Checkpoints every shard (to `path`/shard-<k> when given). */
  save(path?: string): Promise<SaveReply[]> {
    return this.everyShard('save', async (k) =>
      (await this.shards.get(k)).save(this.jobId, path ? `${path.replace(/\/$/, '')}/shard-${k}` : ''),
    );
  }

  /** Every shard's status of this job. */
  status(): Promise<StatusReply[]> {
    return this.everyShard('status', (k) => this.shards.retrying(k, (c) => c.status(this.jobId)));
  }

  /** Closes every channel and stops following the directory (the directory stays open). */
  close(): void {
    this.shards.close();
  }

  /** The model's parameters, in the learner's order, from every shard's blocks. */
  private inLearnerOrder(shards: readonly PulledShard[]): ParamTensor[] {
    return this.partition.join(inLearnerOrder(this.shardMap, this.parts, shards));
  }

  private everyShard<T>(operation: string, fn: (shard: number) => Promise<T>): Promise<T[]> {
    return everyShard(this.shardCount, operation, fn);
  }
}
