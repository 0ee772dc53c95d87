import type { ClaimedTask, MasterClient } from '#libs/master-client';
import { CLAIM_RENEW_MIN_MS } from './defaults.js';

/** The master call a task lease makes (a `MasterClient`). */
export type ClaimRenewer = Pick<MasterClient, 'renewClaim'>;

/** Settings of a `TaskLease`. */
export interface TaskLeaseOptions {
  /** Shortest pause between renewals. */
  minRenewMs?: number;
  /** Told when the task was lost (the master re-queued it or the job stopped). */
  onLost?: (reason: string) => void;
}

/** Renewals a lease gets in: one every this fraction of it, so two can be missed before it lapses. */
export const RENEWALS_PER_LEASE = 3;

/**
 * Keeps a claimed task this trainer's while it works on it: the claim is renewed every third of
 * the lease the master granted (counted from this trainer's clock, so clock skew between the
 * machines does not matter), so a task that waits for the quorum or for a restarting parameter
 * server does not time out while its trainer lives (a trainer that dies stops renewing, and the
 * master takes its task back once the lease lapses). A renewal the master refuses fires `lost`.
 */
export class TaskLease {
  private readonly lostController = new AbortController();
  private timer: NodeJS.Timeout | undefined;
  private ended = false;
  private readonly minRenewMs: number;

  constructor(
    private readonly master: ClaimRenewer,
    private readonly task: ClaimedTask,
    private readonly options: TaskLeaseOptions = {},
  ) {
    this.minRenewMs = options.minRenewMs ?? CLAIM_RENEW_MIN_MS;
    this.schedule(task.leaseMs / RENEWALS_PER_LEASE);
  }

  /** Fires when the task is no longer this trainer's. */
  get lost(): AbortSignal {
    return this.lostController.signal;
  }

  /** Stops renewing (the task was reported or dropped). */
  end(): void {
    this.ended = true;
    clearTimeout(this.timer);
  }

  private schedule(waitMs: number): void {
    if (this.ended) return;
    this.timer = setTimeout(() => void this.renew(), Math.max(this.minRenewMs, waitMs));
    this.timer.unref();
  }

  private async renew(): Promise<void> {
    const reply = await this.master.renewClaim(this.task).catch(() => ({ ok: false, reason: 'unreachable' }) as const);
    if (this.ended) return;
    if (reply.ok) return this.schedule(reply.leaseMs / RENEWALS_PER_LEASE);
    // An unanswered renewal (the master client already retried it) is tried again soon.
    if (reply.reason === 'unreachable') return this.schedule(this.minRenewMs);
    this.ended = true;
    this.options.onLost?.(reply.reason);
    this.lostController.abort();
  }
}
