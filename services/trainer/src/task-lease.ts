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

/**
 * Keeps a claimed task this trainer's while it works on it: the claim is renewed each time half
 * of the time the master granted has passed, so a task that waits for the quorum or for a
 * restarting parameter server does not time out while its trainer lives (a trainer that dies
 * stops renewing, and its task times out as before). A renewal the master refuses fires `lost`.
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
    this.schedule(task.deadlineMs);
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

  private schedule(deadlineMs: number): void {
    if (this.ended) return;
    const waitMs = Math.max(this.minRenewMs, (deadlineMs - Date.now()) / 2);
    this.timer = setTimeout(() => void this.renew(deadlineMs), waitMs);
    this.timer.unref();
  }

  private async renew(deadlineMs: number): Promise<void> {
    const reply = await this.master.renewClaim(this.task).catch(() => ({ ok: false, reason: 'unreachable' }) as const);
    if (this.ended) return;
    if (reply.ok) return this.schedule(reply.deadlineMs);
    // An unanswered renewal is tried again; the old deadline still holds until it passes.
    if (reply.reason === 'unreachable') return this.schedule(deadlineMs);
    this.ended = true;
    this.options.onLost?.(reply.reason);
    this.lostController.abort();
  }
}
