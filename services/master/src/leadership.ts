import { performance } from 'node:perf_hooks';
import type { LineLogger } from '#libs/logging';
import type { LeaderLease, LeaseAttempt } from './leader-lease.js';

/** Share of the lease TTL a holder counts on after sending a renewal: the rest covers clock drift and delays. */
export const LEASE_SAFETY_FRACTION = 0.8;

/** A standby tries again this long after the holder's lease should have run out. */
export const TAKEOVER_SLACK_MS = 10;

/** The token writes are fenced with before this process ever held the lease: never a lease token. */
export const NO_LEASE_TOKEN = 'no-lease';

function errorText(err: unknown): string {
  return err instanceof Error ? err.message || err.name : String(err);
}

/** Whether this process leads, or waits to. */
export type LeaderRole = 'leader' | 'standby';

/** What the holder of the lease does: take office once it holds it, leave when it loses it. */
export interface LeaderDuties {
  /** Starts leading under `token`; a failure gives the lease back (after `leaveOffice`). */
  takeOffice(token: string): Promise<void>;
  /** Stops everything a leader does; called after every `takeOffice`, even a failed one. */
  leaveOffice(reason: string): Promise<void>;
}

/** Options of a `Leadership`. */
export interface LeadershipOptions {
  /** Who this is in log lines, e.g. `master master-0`. */
  name: string;
  logger: LineLogger;
  /** How often the lease is renewed (leader) or tried (standby); default a third of the TTL. */
  renewEveryMs?: number;
}

/**
 * Campaigns for a leader lease and holds office while it has it. A standby tries to take the
 * lease every `renewEveryMs`, and right after the holder's lease runs out. The leader renews it
 * as often; it leaves office at once when a renewal finds the lease gone, when no renewal
 * landed within {@link LEASE_SAFETY_FRACTION} of the TTL after it was sent (Redis unreachable,
 * a long pause), or when a write is refused by the fence. Then it stands by again.
 *
 * Take and leave run one at a time, in order. The lease's fencing token, not this object's
 * view of time, is what keeps a deposed leader from writing.
 */
export class Leadership {
  private readonly name: string;
  private readonly logger: LineLogger;
  private readonly renewEveryMs: number;
  private duties: LeaderDuties | undefined;
  /** The token of the lease held now. */
  private held: string | undefined;
  /** The token of the current or last term, what writes are fenced with. */
  private lastToken: string | undefined;
  private validUntil = 0;
  private inOffice = false;
  private seated = false;
  private standingBy = false;
  private failing = false;
  private stopped = false;
  private timer: NodeJS.Timeout | undefined;
  private watchdog: NodeJS.Timeout | undefined;
  private stepping: Promise<number> | undefined;
  private office: Promise<void> = Promise.resolve();
  private releasing: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly lease: LeaderLease,
    options: LeadershipOptions,
  ) {
    this.name = options.name;
    this.logger = options.logger;
    this.renewEveryMs = options.renewEveryMs ?? Math.max(1, Math.floor(lease.ttlMs / 3));
  }

  /** `leader` while in office under a held lease, `standby` otherwise. */
  get role(): LeaderRole {
    return this.inOffice && this.held !== undefined ? 'leader' : 'standby';
  }

  /** The token to fence writes with: the current or last term's, never a token still to come. */
  get fence(): string {
    return this.lastToken ?? NO_LEASE_TOKEN;
  }

  /** True while the lease is held and its last renewal is recent enough to count on. */
  holdsLease(): boolean {
    return this.held !== undefined && performance.now() < this.validUntil;
  }

  /**
   * Makes a first attempt (taking office before it resolves when it wins), then keeps
   * campaigning in the background until `stop`.
   */
  async start(duties: LeaderDuties): Promise<void> {
    this.duties = duties;
    const delay = await this.step();
    await this.office;
    this.schedule(delay);
  }

  /** A write under `token` was refused by the fence: if that is this term's, leave office now. */
  fenced(token: string): void {
    if (this.held === token) this.lose(token, 'a write was refused by the leader fence');
  }

  /** Stops campaigning; a leader leaves office and gives the lease back. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.stepping;
    const token = this.held;
    if (token !== undefined) this.lose(token, 'shutting down', false);
    await this.office;
    await this.releasing;
  }

  private schedule(delay: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      void this.step().then((next) => this.schedule(next));
    }, delay);
  }

  /** One renewal (leader) or attempt (standby); resolves with the delay until the next. */
  private step(): Promise<number> {
    this.stepping = (this.held === undefined ? this.campaign() : this.renew(this.held)).catch((err: unknown) => {
      this.logger.error(`${this.name}: ${errorText(err)}`);
      return this.renewEveryMs;
    });
    return this.stepping;
  }

  private async renew(token: string): Promise<number> {
    const sentAt = performance.now();
    let renewed: boolean;
    try {
      renewed = await this.lease.renew(token);
    } catch (err) {
      // The watchdog leaves office if no renewal lands in time.
      this.logger.warn(`${this.name}: renewing the leader lease failed: ${errorText(err)}`);
      return this.renewEveryMs;
    }
    if (!renewed) this.lose(token, 'the lease expired or was taken over');
    else if (this.held === token) this.extend(token, sentAt);
    return this.renewEveryMs;
  }

  private async campaign(): Promise<number> {
    const sentAt = performance.now();
    let attempt: LeaseAttempt;
    try {
      attempt = await this.lease.acquire();
    } catch (err) {
      if (!this.failing) this.logger.warn(`${this.name}: trying the leader lease failed: ${errorText(err)}`);
      this.failing = true;
      return this.renewEveryMs;
    }
    this.failing = false;
    if (!attempt.acquired) {
      if (!this.standingBy) this.logger.log(`${this.name} standing by (leader: ${attempt.holder})`);
      this.standingBy = true;
      return Math.min(this.renewEveryMs, attempt.remainingMs + TAKEOVER_SLACK_MS);
    }
    const token = attempt.token;
    if (this.stopped) {
      await this.lease.release(token).catch(() => false);
      return this.renewEveryMs;
    }
    this.held = token;
    this.lastToken = token;
    this.standingBy = false;
    this.extend(token, sentAt);
    this.logger.log(`${this.name} acquired the leader lease (token ${token}); taking office`);
    this.enter(token);
    return this.renewEveryMs;
  }

  /** Counts on the lease until a safe share of its TTL after `sentAt`, and arms the watchdog. */
  private extend(token: string, sentAt: number): void {
    this.validUntil = sentAt + this.lease.ttlMs * LEASE_SAFETY_FRACTION;
    clearTimeout(this.watchdog);
    this.watchdog = setTimeout(
      () => this.lose(token, 'no renewal landed before the lease would run out'),
      Math.max(0, this.validUntil - performance.now()),
    );
  }

  private enter(token: string): void {
    this.office = this.office.then(async () => {
      if (this.held !== token || this.duties === undefined) return;
      this.seated = true;
      try {
        await this.duties.takeOffice(token);
      } catch (err) {
        this.logger.error(`${this.name}: taking office failed: ${errorText(err)}`);
        this.lose(token, 'taking office failed');
        return;
      }
      if (this.held !== token) return;
      this.inOffice = true;
      this.logger.log(`${this.name} is the leader (token ${token})`);
    });
  }

  /** Drops the lease at once (no more replies, no more renewals), then leaves office in order. */
  private lose(token: string, reason: string, warn = true): void {
    if (this.held !== token) return;
    this.held = undefined;
    this.inOffice = false;
    clearTimeout(this.watchdog);
    if (warn) this.logger.warn(`${this.name} lost the leader lease (${reason}); leaving office`);
    this.office = this.office.then(async () => {
      if (this.seated && this.duties !== undefined) {
        this.seated = false;
        try {
          await this.duties.leaveOffice(reason);
        } catch (err) {
          this.logger.error(`${this.name}: leaving office failed: ${errorText(err)}`);
        }
      }
      // Free the lease now if it is still ours, so a standby need not wait for it to expire.
      this.releasing = this.lease.release(token).catch(() => false);
      if (this.stopped) return;
      this.standingBy = true;
      this.logger.log(`${this.name} standing by`);
    });
  }
}
