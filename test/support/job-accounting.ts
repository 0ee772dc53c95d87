import { MasterClient } from '#libs/master-client';
import type { EpochAccounting, JobEvent, JobStatusReply, NatsConnection } from '#libs/messaging';
import { waitUntil } from './chaos-watch.js';

/** How often the master's status (and so its per-epoch accounting) is polled. */
export const ACCOUNTING_POLL_MS = 1_000;
/** Deadline of one status request to the master. */
export const STATUS_REQUEST_TIMEOUT_MS = 2_000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface StatusSample {
  status: JobStatusReply;
  at: number;
}

/**
 * Polls the master's status of one job every {@link ACCOUNTING_POLL_MS} and keeps the latest
 * accounting of every epoch it saw (the master reports only its last few epochs), so the
 * exactly-once rule can be checked over the whole job, across master failovers.
 */
export class JobAccountingWatch {
  private readonly epochs = new Map<number, EpochAccounting>();
  private readonly client: MasterClient;
  private running = false;
  private loop: Promise<void> = Promise.resolve();
  /** The latest status answered, if any. */
  last?: StatusSample;

  constructor(
    nc: NatsConnection,
    private readonly jobId: string,
  ) {
    this.client = new MasterClient(nc, `chaos-watch-${process.pid}`, {
      logger: { log: () => undefined, warn: () => undefined, error: () => undefined },
    });
  }

  /** Starts polling. */
  start(): void {
    this.running = true;
    this.loop = (async () => {
      while (this.running) {
        await this.poll();
        await sleep(ACCOUNTING_POLL_MS);
      }
    })();
  }

  /** Stops polling after one last status (so the final accounting is included). */
  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
    await this.poll();
  }

  /** Keeps the later of two accounts of one epoch: the one with more tasks settled. */
  private keep(account: EpochAccounting): void {
    const known = this.epochs.get(account.epoch);
    if (known === undefined || account.done + account.discarded >= known.done + known.discarded) {
      this.epochs.set(account.epoch, account);
    }
  }

  /** Asks the master once; undefined while no master answers. */
  async poll(): Promise<StatusSample | undefined> {
    try {
      const status = await this.client.jobStatus(this.jobId, { timeoutMs: STATUS_REQUEST_TIMEOUT_MS });
      for (const e of status.epochs ?? []) this.keep(e);
      this.last = { status, at: Date.now() };
      return this.last;
    } catch {
      return undefined;
    }
  }

  /**
   * Adds the accounting that the master's `epoch` events carry: each one closes an epoch with its
   * per-task counts, so an epoch that no status poll caught in time is still checked.
   */
  addEpochEvents(events: readonly JobEvent[]): void {
    for (const e of events) {
      if (e.type !== 'epoch') continue;
      this.keep({ epoch: e.epoch - 1, done: e.done, discarded: e.discarded, doneCounts: { ...e.doneCounts } });
    }
  }

  /** Accounting of every epoch seen, by epoch. */
  accounting(): EpochAccounting[] {
    return [...this.epochs.values()].sort((a, b) => a.epoch - b.epoch);
  }

  /**
   * Every breach of "each task done exactly once per epoch" in what was seen: a task counted more
   * than once (in the next epoch too, when it opened before the job stopped), a finished epoch
   * whose done and discarded tasks do not add up to every task, an epoch never seen at all, and discarded tasks other than the `discarded` expected over the
   * whole job (none unless a test discards on purpose).
   */
  problems(expected: { discarded?: number } = {}): string[] {
    const out: string[] = [];
    const last = this.last?.status;
    if (!last) return ['the master never answered a status request'];
    const total = last.tasks.total;
    const finalEpoch = last.epoch;
    // The epoch after the current one may have opened (its tasks go out while the current ends).
    const lastSeen = Math.max(finalEpoch, ...this.epochs.keys());
    if (lastSeen > finalEpoch + 1) out.push(`epoch ${lastSeen} seen while epoch ${finalEpoch} was current`);
    for (let epoch = 0; epoch <= lastSeen; epoch++) {
      const e = this.epochs.get(epoch);
      if (!e) {
        if (epoch <= finalEpoch) out.push(`epoch ${epoch}: never seen in a status reply`);
        continue;
      }
      for (const [task, count] of Object.entries(e.doneCounts)) {
        if (count !== 1) out.push(`epoch ${epoch}: task ${task} counted done ${count} times`);
      }
      const doneTasks = Object.keys(e.doneCounts).length;
      if (e.done !== doneTasks) out.push(`epoch ${epoch}: done ${e.done} but ${doneTasks} tasks in doneCounts`);
      if (epoch < finalEpoch && e.done + e.discarded !== total) {
        out.push(`epoch ${epoch}: finished with ${e.done} done + ${e.discarded} discarded of ${total} tasks`);
      }
    }
    const discarded = this.accounting().reduce((sum, e) => sum + e.discarded, 0);
    if (discarded !== (expected.discarded ?? 0)) {
      out.push(`${discarded} tasks discarded over the job, expected ${expected.discarded ?? 0}`);
    }
    return out;
  }

  /**
   * Resolves with the first status answered after `since` (epoch ms) whose accounting moved past
   * `before`: a later epoch, or more tasks done in the same one.
   */
  async waitBeyond(
    before: JobStatusReply | undefined,
    since: number,
    timeoutMs: number,
    abort?: () => string | undefined,
  ) {
    return waitUntil(
      `job ${this.jobId}: the master counting tasks again`,
      async () => {
        const sample = await this.poll();
        if (!sample || sample.at < since) return undefined;
        if (!before) return sample;
        const s = sample.status;
        return s.epoch > before.epoch || (s.epoch === before.epoch && s.tasks.done > before.tasks.done)
          ? sample
          : undefined;
      },
      timeoutMs,
      {
        describe: () =>
          this.last
            ? `last status: epoch ${this.last.status.epoch}, ${this.last.status.tasks.done} done`
            : 'no status answered',
        abort,
      },
    );
  }
}
