import { randomBytes } from 'node:crypto';
import type { RedisConnection } from '#libs/messaging';

/** How long the leader lease lasts unless renewed; the leader renews it every third of this. */
export const LEASE_TTL_MS = 5_000;

/**
 * Takes the lease when nobody holds it. KEYS: leader, epoch counter. ARGV: holder id, TTL in ms.
 * Returns `{1, token}` with a token `<epoch>:<holder>` whose epoch is one more than any before,
 * or `{0, holder token, remaining ms}` while someone else holds it (-1: no expiry).
 */
const ACQUIRE_SCRIPT = `
local holder = redis.call('GET', KEYS[1])
if holder then return {0, holder, redis.call('PTTL', KEYS[1])} end
local epoch = redis.call('INCR', KEYS[2])
local token = string.format('%d', epoch) .. ':' .. ARGV[1]
redis.call('SET', KEYS[1], token, 'PX', ARGV[2])
return {1, token}
`;

/** Extends the lease only while it still holds `ARGV[1]`. Returns 1, or 0 when it is gone. */
const RENEW_SCRIPT = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
`;

/** Deletes the lease only while it still holds `ARGV[1]`. Returns 1, or 0 when it was not held. */
const RELEASE_SCRIPT = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`;

/** The outcome of one attempt to take the lease. */
export type LeaseAttempt =
  | { acquired: true; token: string }
  | {
      acquired: false;
      /** The current holder's token. */
      holder: string;
      /** How long the holder's lease still runs unless renewed (ms; a full TTL if it never expires). */
      remainingMs: number;
    };

/** Where the lease lives in Redis. */
export interface LeaseKeys {
  /** String: the holder's token, expiring with the lease. The JobStore fences writes on it. */
  leader: string;
  /** Integer: the last epoch handed out; only ever incremented. */
  epoch: string;
}

/** The lease keys under a key prefix: `<prefix>:leader` and `<prefix>:leader-epoch`. */
export function leaseKeys(prefix: string): LeaseKeys {
  return { leader: `${prefix}:leader`, epoch: `${prefix}:leader-epoch` };
}

/** The epoch of a lease token (`<epoch>:<holder id>:<nonce>`), or NaN when it is not one. */
export function leaseEpoch(token: string): number {
  const sep = token.indexOf(':');
  return sep < 1 ? Number.NaN : Number(token.slice(0, sep));
}

/**
 * A leader lease in Redis with a fencing token. Whoever takes it gets a token
 * `<epoch>:<holder id>:<nonce>` whose epoch is greater than every token handed out before, so a
 * store that checks the token on every write refuses a deposed holder's writes. The random
 * nonce keeps tokens unique even if Redis lost the epoch counter and a holder id is reused.
 * Each operation is one atomic script: take when free, extend while held, delete while held.
 */
export class LeaderLease {
  constructor(
    private readonly redis: RedisConnection,
    readonly keys: LeaseKeys,
    /** Identifies the holder in its token, for people reading it; uniqueness comes from the rest. */
    readonly holderId: string,
    readonly ttlMs: number = LEASE_TTL_MS,
  ) {}

  /** Takes the lease if nobody holds it. */
  async acquire(): Promise<LeaseAttempt> {
    const reply = (await this.redis.eval(ACQUIRE_SCRIPT, {
      keys: [this.keys.leader, this.keys.epoch],
      arguments: [`${this.holderId}:${randomBytes(3).toString('hex')}`, String(this.ttlMs)],
    })) as unknown[];
    if (Number(reply[0]) === 1) return { acquired: true, token: String(reply[1]) };
    const pttl = Number(reply[2]);
    return { acquired: false, holder: String(reply[1]), remainingMs: pttl >= 0 ? pttl : this.ttlMs };
  }

  /** Extends the lease by a full TTL; false when `token` no longer holds it. */
  async renew(token: string): Promise<boolean> {
    const reply = await this.redis.eval(RENEW_SCRIPT, {
      keys: [this.keys.leader],
      arguments: [token, String(this.ttlMs)],
    });
    return Number(reply) === 1;
  }

  /** Gives the lease up at once, so a standby need not wait for it to expire; false when not held. */
  async release(token: string): Promise<boolean> {
    const reply = await this.redis.eval(RELEASE_SCRIPT, { keys: [this.keys.leader], arguments: [token] });
    return Number(reply) === 1;
  }

  /** The current holder's token, or null when the lease is free. */
  async holder(): Promise<string | null> {
    return (await this.redis.get(this.keys.leader)) ?? null;
  }
}
