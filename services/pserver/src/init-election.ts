import { IncompleteInitError, InitLeaseHeldError } from './errors.js';

/** How long the elected trainer holds the init lease without renewing it. */
export const INIT_LEASE_MS = 60_000;

/** What `beginInit` answers. */
export interface InitElectionResult {
  elected: boolean;
  initialized: boolean;
  version: number;
  leaseMs: number;
  leaseHolder: string;
}

/** Settings of an `InitElection`. */
export interface InitElectionOptions {
  jobId: string;
  /** This process's shard index; only shard 0 elects. */
  shard: number;
  leaseMs: number;
  /** Clock, in milliseconds. */
  now: () => number;
}

/** An initial parameter as the elected trainer sent it. */
export interface StagedTensor {
  name: string;
  shape: number[];
  value: Float32Array;
}

/**
 * Which trainer initialises a job's parameters, and the parameters it has sent so far. On shard
 * 0 the first trainer to ask is elected and holds a lease; another trainer is elected only once
 * the lease expired, so a trainer that died half-way is replaced. The other shards never elect
 * and take initial parameters from whoever sends them (shard 0 decided who that is).
 */
export class InitElection {
  private lease?: { holder: string; expiresAt: number };
  private readonly staged = new Map<string, { shape: number[]; value: Float32Array }>();

  constructor(private readonly options: InitElectionOptions) {}

  /** How long the lease lasts without renewal. */
  get leaseMs(): number {
    return this.options.leaseMs;
  }

  /** Who holds the lease, empty when nobody does. */
  get holder(): string {
    return this.lease?.holder ?? '';
  }

  /** Number of initial parameters received so far. */
  get stagedCount(): number {
    return this.staged.size;
  }

  /**
   * Elects `trainerId` on shard 0 unless another trainer holds an unexpired lease; the holder
   * asking again renews its lease. Other shards elect nobody.
   */
  elect(trainerId: string): boolean {
    if (this.options.shard !== 0) return false;
    const now = this.options.now();
    if (this.lease && this.lease.holder !== trainerId && this.lease.expiresAt > now) return false;
    this.lease = { holder: trainerId, expiresAt: now + this.options.leaseMs };
    return true;
  }

  /** On shard 0, refuses a trainer that does not hold the lease with `InitLeaseHeldError`. */
  requireHolder(trainerId: string): void {
    if (this.options.shard !== 0) return;
    const lease = this.lease;
    if (!lease) throw new InitLeaseHeldError(this.options.jobId, '', trainerId);
    if (lease.holder !== trainerId) throw new InitLeaseHeldError(this.options.jobId, lease.holder, trainerId);
  }

  /** Keeps initial parameters (checked by the caller) until `finish`, and renews the lease. */
  stage(trainerId: string, tensors: readonly { name: string; shape: readonly number[]; value: Float32Array }[]): void {
    for (const t of tensors) this.staged.set(t.name, { shape: [...t.shape], value: t.value });
    if (this.options.shard === 0 && this.lease?.holder === trainerId) {
      this.lease.expiresAt = this.options.now() + this.options.leaseMs;
    }
  }

  /**
   * Ends the election: the staged parameters in the order of `expected` (the shard's own
   * parameters, when known; otherwise in the order they arrived), which are then let go with
   * the lease. Throws `IncompleteInitError`, changing nothing, when one of `expected` is missing.
   */
  finish(expected: readonly string[] | undefined): StagedTensor[] {
    if (expected) {
      const missing = expected.filter((n) => !this.staged.has(n));
      if (missing.length > 0) throw new IncompleteInitError(this.options.jobId, missing);
    }
    const order = expected ?? [...this.staged.keys()];
    const tensors = order.map((name) => ({ name, ...this.staged.get(name)! }));
    this.staged.clear();
    this.lease = undefined;
    return tensors;
  }
}
