import { status as GrpcStatus } from '@grpc/grpc-js';
import type { BeginInitReply, ShardMap, TensorInfo } from '#libs/pserver-protocol';
import { PserverTimeoutError, ShardCallError } from './errors.js';
import { everyShard, splitByShard, type TensorLike } from './shard-fanout.js';
import type { ShardClients } from './shard-clients.js';
import { sleep } from '#libs/retry';

/**
 * The longest pause of `waitInitialized` between two asks while another trainer initialises; the
 * pauses start at {@link INIT_FIRST_POLL_MS} and double up to it.
 */
export const INIT_POLL_MS = 250;
/**
 * The first pause of `waitInitialized`. A small model is initialised within tens of
 * milliseconds (30-50 ms for the example MLP on 2 shards), so the trainers that wait for it train
 * that much later, not a whole `INIT_POLL_MS`; a large one is asked about at most every
 * `INIT_POLL_MS` after a few asks.
 */
export const INIT_FIRST_POLL_MS = 20;
/** How long `waitInitialized` waits for the parameters before giving up. */
export const INIT_WAIT_MS = 10 * 60_000;

/**
 * The pause of `waitInitialized` after its ask number `ask` (from 0): `INIT_FIRST_POLL_MS`,
 * doubling with each ask, at most `longest`.
 */
export function initPollPause(ask: number, longest = INIT_POLL_MS): number {
  return Math.min(INIT_FIRST_POLL_MS * 2 ** Math.min(ask, 30), longest);
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

/** What an `InitElectionProtocol` needs to know about the job and the trainer. */
export interface InitElectionProtocolOptions {
  jobId: string;
  trainerId: string;
  /** Every parameter of the model, as the shards are told it. */
  manifest: TensorInfo[];
  shardMap: ShardMap;
}

/**
 * The trainer's side of the init election over every shard of a job: shard 0 elects one trainer
 * (which holds a lease), that trainer sends the initial parameters to each shard and finishes,
 * and the others wait until every shard has them. A trainer that loses its lease half-way goes
 * back to waiting; one that finds the lease expired takes over.
 */
export class InitElectionProtocol {
  private readonly initializedShards = new Set<number>();
  private readonly initVersions: number[] = [];
  private specJson = '';

  constructor(
    private readonly shards: ShardClients,
    private readonly options: InitElectionProtocolOptions,
  ) {}

  /**
   * Asks every shard to initialise the job with `specJson`. Shard 0 answers first and decides
   * the election; the other shards only learn the spec and the parameter list.
   */
  async beginInit(specJson: string): Promise<InitElection> {
    this.specJson = specJson;
    const { jobId, trainerId, manifest } = this.options;
    const shardCount = this.shards.shardCount;
    const request = (shard: number) =>
      this.shards.retrying(shard, (c) => c.beginInit({ jobId, trainerId, specJson, params: manifest, shardCount }));
    const first = await request(0);
    const rest = await everyShard(shardCount, 'beginInit', (k) => request(k), 1);
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
    const { jobId, trainerId, shardMap } = this.options;
    const byShard = splitByShard(shardMap, params, 'initParams');
    await everyShard(this.shards.shardCount, 'initParams', async (k) => {
      if (this.initializedShards.has(k)) return;
      if (byShard[k].length === 0) return;
      await (await this.shards.get(k)).initParams(jobId, trainerId, byShard[k]);
    });
  }

  /** Marks every shard initialised; returns their versions (0 unless restored from a checkpoint). */
  async finishInit(): Promise<number[]> {
    const { jobId, trainerId } = this.options;
    const versions = await everyShard(this.shards.shardCount, 'finishInit', async (k) => {
      if (this.initializedShards.has(k)) return this.initVersions[k] ?? 0;
      return (await this.shards.retrying(k, (c) => c.finishInit(jobId, trainerId))).version;
    });
    versions.forEach((_, k) => this.initializedShards.add(k));
    return versions;
  }

  /**
   * Waits until every shard has the parameters, asking again after pauses that double from
   * `INIT_FIRST_POLL_MS` up to `pollMs` (at most; `INIT_POLL_MS` unless given). Resolves
   * `'elected'` instead when the trainer that was initialising lost its lease and this one was
   * elected in its place; the caller must then `initParams` and `finishInit`.
   */
  async waitInitialized(options: { pollMs?: number; timeoutMs?: number } = {}): Promise<'initialized' | 'elected'> {
    const deadline = Date.now() + (options.timeoutMs ?? INIT_WAIT_MS);
    for (let ask = 0; ; ask++) {
      const election = await this.beginInit(this.specJson);
      if (election.initialized) return 'initialized';
      if (election.elected) return 'elected';
      if (Date.now() > deadline) {
        throw new PserverTimeoutError(
          `job ${this.options.jobId}: parameters not initialised within ${options.timeoutMs ?? INIT_WAIT_MS} ms` +
            (election.leaseHolder ? ` (lease held by ${election.leaseHolder})` : ''),
          0,
          GrpcStatus.DEADLINE_EXCEEDED,
          'init-timeout',
        );
      }
      await sleep(initPollPause(ask, options.pollMs));
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
}
