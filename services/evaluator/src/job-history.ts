/**
 * Writes a run's history files (`history-files.ts`) from the events stream: an ordered consumer
 * of the job's events, starting after the highest sequence the files hold (or a little before
 * the run started), so an evaluator that restarts goes on where the last one stopped and no
 * line is written twice.
 */
import { DeliverPolicy, type ConsumerMessages, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import type { LineLogger } from '#libs/logging';
import { STREAMS, SUBJECTS, type JobEvent, type JobEventPublisher } from '#libs/messaging';
import { sleep } from '#libs/retry';
import { HISTORY_DRAIN_TIMEOUT_MS, HISTORY_START_MARGIN_MS, SNAPSHOT_RETRY_DELAY_MS } from './defaults.js';
import { errorMessage } from './errors.js';
import { HistoryFiles, metricsLine } from './history-files.js';

/** What a {@link JobHistory} reads from. */
export interface JobHistoryDeps {
  /** The publisher of this process's events, which `finish` waits for. */
  events: JobEventPublisher;
  js: JetStreamClient;
  jsm: JetStreamManager;
  logger: LineLogger;
}

/** The run whose history is written. */
export interface JobHistoryRun {
  jobId: string;
  startedAt: string;
  output: string;
  metric: 'accuracy' | 'loss';
}

/** See the file comment. `start`, then `finish` once the run is over or `close` to stop at once. */
export class JobHistory {
  private readonly files: HistoryFiles;
  private written = 0;
  private messages: ConsumerMessages | undefined;
  private loop: Promise<void> | undefined;
  private stopping = false;

  constructor(
    private readonly deps: JobHistoryDeps,
    private readonly run: JobHistoryRun,
  ) {
    this.files = new HistoryFiles(run.output);
  }

  /** Starts following the job's events (once). */
  start(): void {
    this.loop ??= this.follow();
  }

  /**
   * Waits (up to `timeoutMs`) until every event published so far, our own included, is
   * written, then stops following.
   */
  async finish(timeoutMs = HISTORY_DRAIN_TIMEOUT_MS): Promise<void> {
    this.start();
    try {
      const deadline = Date.now() + timeoutMs;
      await this.deps.events.flush(timeoutMs);
      const last = await this.deps.jsm.streams
        .getMessage(STREAMS.events.name, { last_by_subj: SUBJECTS.events(this.run.jobId) })
        .then((m) => m?.seq ?? 0)
        .catch(() => 0);
      while (this.written < last && Date.now() < deadline) await sleep(50);
      if (this.written < last) {
        this.deps.logger.warn(`job ${this.run.jobId}: history stops at event #${this.written} of ${last}`);
      }
    } finally {
      await this.close();
    }
  }

  /** Stops following; lines written stay, and a later history of the run goes on after them. */
  async close(): Promise<void> {
    this.stopping = true;
    // Closing a consume iterator only takes effect when it is next iterated, and its promise
    // settles only then: the loop below does that iterating, so it is the loop that is awaited.
    this.messages?.close().catch(() => undefined);
    await this.loop;
  }

  private async follow(): Promise<void> {
    const startedAtMs = Date.parse(this.run.startedAt);
    while (!this.stopping) {
      try {
        this.written = Math.max(this.written, await this.files.open());
        const from =
          this.written > 0 || !Number.isFinite(startedAtMs)
            ? { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: this.written + 1 }
            : {
                deliver_policy: DeliverPolicy.StartTime,
                opt_start_time: new Date(startedAtMs - HISTORY_START_MARGIN_MS).toISOString(),
              };
        const consumer = await this.deps.js.consumers.get(STREAMS.events.name, {
          filter_subjects: SUBJECTS.events(this.run.jobId),
          ...from,
        });
        this.messages = await consumer.consume();
        // Stopped while this consumer was being set up: the loop below ends at once (awaiting the
        // close here would wait for an iteration that never comes).
        if (this.stopping) void this.messages.close();
        for await (const msg of this.messages) {
          if (msg.seq <= this.written) continue;
          let event: JobEvent;
          try {
            event = msg.json<JobEvent>();
          } catch {
            this.written = msg.seq;
            continue;
          }
          const metrics =
            event.type === 'metrics' ? metricsLine(msg.seq, event, this.run.metric, startedAtMs) : undefined;
          await this.files.append(msg.seq, event, metrics);
          this.written = msg.seq;
        }
      } catch (err) {
        if (this.stopping) break;
        this.deps.logger.warn(`job ${this.run.jobId}: writing its history failed (${errorMessage(err)}); retrying`);
        await sleep(SNAPSHOT_RETRY_DELAY_MS);
      }
    }
  }
}
