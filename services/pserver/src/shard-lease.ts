import { readlinkSync } from 'node:fs';
import { hostname } from 'node:os';
import type { LineLogger } from '#libs/logging';
import type { RedisConnection } from '#libs/messaging';
import { sleep } from '#libs/retry';

/** How long a shard's lease lasts without renewal; a standby takes over this long after the owner died. */
export const SHARD_LEASE_TTL_MS = 10_000;
/** How often a standby asks for the lease again. */
export const STANDBY_POLL_MS = 1_000;

/** Who holds a shard: the value of its lease key. */
export interface ShardLeaseHolder {
  /** The process's service id. */
  id: string;
  host: string;
  pid: number;
  /** The pid namespace (`/proc/self/ns/pid`), when the platform has one. */
  pidNamespace?: string;
  since: string;
}

/** Settings of a `ShardLease`. */
export interface ShardLeaseOptions {
  /** The Redis key of the lease. */
  key: string;
  /** The shard, for log lines. */
  shard: number;
  /** This process's service id. */
  id: string;
  /** Default `SHARD_LEASE_TTL_MS`. */
  ttlMs?: number;
  /** Default `STANDBY_POLL_MS`, at most the TTL. */
  pollMs?: number;
  logger: LineLogger;
  /**
   * Called once when the lease is lost while held: another process holds it, or it could not
   * be renewed for a whole TTL. The owner must stop serving at once.
   */
  onLost: (reason: string) => void;
}

/** The lease could not be acquired because `acquire` was aborted. */
export class LeaseWaitAbortedError extends Error {
  override readonly name = 'LeaseWaitAbortedError';

  constructor(
    readonly shard: number,
    options?: ErrorOptions,
  ) {
    super(`stopped waiting for the lease of shard ${shard}`, options);
  }
}

/** Renews the lease if it is ours; takes it back if it vanished; else says who has it. */
const RENEW_SCRIPT = `
local current = redis.call('GET', KEYS[1])
if current == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if not current then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return current
`;

/** Replaces the value `ARGV[1]` (a dead holder's) with `ARGV[2]`. */
const TAKE_OVER_SCRIPT = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return 1
end
return 0
`;

/** Deletes the key if it still holds `ARGV[1]`. */
const RELEASE_SCRIPT = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
`;

function pidNamespace(): string | undefined {
  try {
    return readlinkSync('/proc/self/ns/pid');
  } catch {
    return undefined;
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function parseHolder(value: string): ShardLeaseHolder | undefined {
  try {
    const v = JSON.parse(value) as Partial<ShardLeaseHolder>;
    return typeof v.id === 'string' && typeof v.pid === 'number' && typeof v.host === 'string'
      ? (v as ShardLeaseHolder)
      : undefined;
  } catch {
    return undefined;
  }
}

function describeHolder(value: string): string {
  const h = parseHolder(value);
  return h ? `${h.id} (pid ${h.pid} on ${h.host}, since ${h.since})` : JSON.stringify(value);
}

/**
 * Ownership of one shard: a Redis key set with `NX` and a TTL, renewed by its holder, so two
 * processes never serve the same shard. A second process waits (standby) until the key lapses,
 * then takes over. A holder that is found dead on this very machine (same host name and pid
 * namespace, no such process) is replaced at once instead of after the TTL: that is a restart
 * on the same machine.
 *
 * The holder counts the lease as lost when Redis names another holder, or when a whole TTL
 * passed since the start of its last successful renewal (measured on its own monotonic clock,
 * so it gives up no later than Redis lets the key expire).
 */
export class ShardLease {
  private readonly ttlMs: number;
  private readonly pollMs: number;
  private readonly value: string;
  private timer?: NodeJS.Timeout;
  private expiry?: NodeJS.Timeout;
  private validUntil = 0;
  private isHeld = false;
  private renewing = false;
  private lastError = '';

  constructor(
    private readonly redis: RedisConnection,
    private readonly options: ShardLeaseOptions,
  ) {
    this.ttlMs = options.ttlMs ?? SHARD_LEASE_TTL_MS;
    this.pollMs = Math.min(options.pollMs ?? STANDBY_POLL_MS, this.ttlMs);
    const holder: ShardLeaseHolder = {
      id: options.id,
      host: hostname(),
      pid: process.pid,
      pidNamespace: pidNamespace(),
      since: new Date().toISOString(),
    };
    this.value = JSON.stringify(holder);
  }

  /** True while this process holds the lease. */
  get held(): boolean {
    return this.isHeld;
  }

  /**
   * Resolves once this process holds the lease, waiting as a standby while another one does;
   * then keeps renewing it. Rejects with `LeaseWaitAbortedError` when `signal` aborts first.
   */
  async acquire(signal?: AbortSignal): Promise<void> {
    const { shard, logger } = this.options;
    let reported = '';
    let started: number;
    for (;;) {
      if (signal?.aborted) throw new LeaseWaitAbortedError(shard, { cause: signal.reason });
      started = performance.now();
      try {
        const holder = await this.tryAcquire();
        if (holder === undefined) break;
        if (holder !== reported) {
          reported = holder;
          logger.warn(
            `shard ${shard} is served by ${describeHolder(holder)}; standing by until its lease lapses (TTL ${this.ttlMs} ms)`,
          );
        }
      } catch (err) {
        logger.warn(`shard ${shard}: cannot ask Redis for the lease: ${(err as Error).message}; retrying`);
      }
      await sleep(this.pollMs, signal);
    }
    this.isHeld = true;
    this.extend(started);
    logger.log(`shard ${shard}: lease acquired (${this.options.key}, TTL ${this.ttlMs} ms)`);
    this.timer = setInterval(() => void this.renew(), Math.max(50, Math.floor(this.ttlMs / 3)));
    this.timer.unref();
  }

  /** Stops renewing and deletes the key if it is still this process's. */
  async release(): Promise<void> {
    clearInterval(this.timer);
    clearTimeout(this.expiry);
    this.timer = undefined;
    if (!this.isHeld) return;
    this.isHeld = false;
    try {
      await withTimeout(
        this.redis.eval(RELEASE_SCRIPT, { keys: [this.options.key], arguments: [this.value] }),
        this.ttlMs,
      );
    } catch (err) {
      this.options.logger.warn(
        `shard ${this.options.shard}: lease not released (it lapses by itself): ${(err as Error).message}`,
      );
    }
  }

  /** Takes the lease if free (or held by a dead process here); else the holder's value. */
  private async tryAcquire(): Promise<string | undefined> {
    const { key, shard, logger } = this.options;
    const set = await withTimeout(
      this.redis.set(key, this.value, { condition: 'NX', expiration: { type: 'PX', value: this.ttlMs } }),
      this.ttlMs,
    );
    if (set === 'OK') return undefined;
    const current = await withTimeout(this.redis.get(key), this.ttlMs);
    if (current === null) return this.tryAcquire();
    const holder = parseHolder(current);
    const mine = parseHolder(this.value)!;
    const deadHere =
      holder !== undefined &&
      holder.host === mine.host &&
      holder.pidNamespace !== undefined &&
      holder.pidNamespace === mine.pidNamespace &&
      holder.pid !== mine.pid &&
      !isAlive(holder.pid);
    if (deadHere) {
      const taken = await withTimeout(
        this.redis.eval(TAKE_OVER_SCRIPT, {
          keys: [key],
          arguments: [current, this.value, String(this.ttlMs)],
        }),
        this.ttlMs,
      );
      if (Number(taken) === 1) {
        logger.log(`shard ${shard}: previous owner ${describeHolder(current)} is dead; taking over at once`);
        return undefined;
      }
    }
    return current;
  }

  private async renew(): Promise<void> {
    if (!this.isHeld || this.renewing) return;
    this.renewing = true;
    const started = performance.now();
    try {
      const reply = await withTimeout(
        this.redis.eval(RENEW_SCRIPT, { keys: [this.options.key], arguments: [this.value, String(this.ttlMs)] }),
        Math.max(50, this.validUntil - started),
      );
      if (!this.isHeld) return;
      if (reply === 1 || reply === '1') {
        this.extend(started);
        return;
      }
      this.lose(`the lease is now held by ${describeHolder(String(reply))}`);
    } catch (err) {
      if (!this.isHeld) return;
      this.lastError = (err as Error).message;
      this.options.logger.warn(`shard ${this.options.shard}: lease renewal failed: ${this.lastError}`);
    } finally {
      this.renewing = false;
    }
  }

  /**
   * The lease is valid for a TTL from `renewalStart` (Redis extended it no earlier); unless
   * renewed again by then, it counts as lost.
   */
  private extend(renewalStart: number): void {
    this.validUntil = renewalStart + this.ttlMs;
    this.lastError = '';
    this.armExpiry();
  }

  private armExpiry(): void {
    clearTimeout(this.expiry);
    this.expiry = setTimeout(
      () => {
        if (!this.isHeld) return;
        // A timer may fire a little early by the monotonic clock: look again then.
        if (performance.now() < this.validUntil) return this.armExpiry();
        this.lose(`could not renew the lease for ${this.ttlMs} ms${this.lastError ? ` (${this.lastError})` : ''}`);
      },
      Math.max(1, Math.ceil(this.validUntil - performance.now())),
    );
    this.expiry.unref();
  }

  private lose(reason: string): void {
    clearInterval(this.timer);
    clearTimeout(this.expiry);
    this.timer = undefined;
    this.isHeld = false;
    this.options.onLost(reason);
  }
}

class RedisTimeoutError extends Error {
  override readonly name = 'RedisTimeoutError';
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new RedisTimeoutError(`no answer from Redis within ${Math.round(ms)} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
