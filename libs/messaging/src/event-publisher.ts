import { randomBytes } from 'node:crypto';
import type { JetStreamClient } from '@nats-io/jetstream';
import { errors } from '@nats-io/transport-node';
import type { LineLogger } from '#libs/logging';
import { retryWithBackoff, sleep } from '#libs/retry';
import type { JobEvent, JobEventInput } from './events.js';
import { encodeJson } from './json-codec.js';
import { SUBJECTS } from './subjects.js';

/** First pause before a publish the events stream did not acknowledge is tried again; it doubles up to the max. */
export const EVENT_RETRY_MIN_MS = 250;
/** Longest pause between attempts of one event. */
export const EVENT_RETRY_MAX_MS = 5_000;
/** How long one attempt waits for the stream's acknowledgement. */
export const EVENT_ACK_TIMEOUT_MS = 5_000;
/** How long a service that shuts down waits for its events still queued to be stored. */
export const EVENT_SHUTDOWN_FLUSH_MS = 5_000;
/** Events kept while the stream does not take them; beyond it the oldest is dropped, with an error logged. */
export const EVENT_QUEUE_LIMIT = 10_000;

/** Settings of a {@link JobEventPublisher}; each defaults to the constant of its name. */
export interface JobEventPublisherOptions {
  retryMinMs?: number;
  retryMaxMs?: number;
  ackTimeoutMs?: number;
  queueLimit?: number;
}

interface QueuedEvent {
  event: JobEvent;
  data: Uint8Array;
  msgID: string;
}

/**
 * Publishes job events to the events stream, each acknowledged by it, one at a time in the order
 * they were given. A core publish on a subject a stream captures is dropped without a word while
 * the stream has no leader (a NATS node died, a host was cut off: seconds to over a minute), and
 * a job's `stopped` event lost that way leaves whoever waits for it waiting; so an event the stream
 * did not acknowledge is tried again, with doubling pauses, until it lands or the publisher is
 * closed (or its connection is: then what waits is dropped, logged as an error, as is an event the
 * connection has no permission to publish). Each event carries a message id (`Nats-Msg-Id`), so a retry of one that landed without
 * its acknowledgement reaching us is dropped by the stream, within its duplicate window (two
 * minutes by default; later a retry may store it twice). `publish` never waits, so the
 * publisher's callers go on while the stream is away; at most {@link EVENT_QUEUE_LIMIT} events
 * wait, and `flush` waits for them.
 */
export class JobEventPublisher {
  private readonly queue: QueuedEvent[] = [];
  /** Prefix of this publisher's message ids; the count of events makes each unique. */
  private readonly idPrefix = randomBytes(6).toString('hex');
  private published = 0;
  private sending: Promise<void> | undefined;
  private closed = false;
  private readonly abort = new AbortController();
  private readonly retryMinMs: number;
  private readonly retryMaxMs: number;
  private readonly ackTimeoutMs: number;
  private readonly queueLimit: number;

  constructor(
    private readonly js: JetStreamClient,
    private readonly logger?: LineLogger,
    options: JobEventPublisherOptions = {},
  ) {
    this.retryMinMs = options.retryMinMs ?? EVENT_RETRY_MIN_MS;
    this.retryMaxMs = options.retryMaxMs ?? EVENT_RETRY_MAX_MS;
    this.ackTimeoutMs = options.ackTimeoutMs ?? EVENT_ACK_TIMEOUT_MS;
    this.queueLimit = options.queueLimit ?? EVENT_QUEUE_LIMIT;
  }

  /** Queues an event, stamped with the time now, for the job's events subject. */
  publish(input: JobEventInput): void {
    const event = { ...input, at: new Date().toISOString() } as JobEvent;
    if (this.closed) {
      this.logger?.error(`${describe(event)} not published: the publisher is closed`);
      return;
    }
    this.published += 1;
    this.queue.push({ event, data: encodeJson(event), msgID: `${this.idPrefix}.${this.published}` });
    if (this.queue.length > this.queueLimit) {
      const dropped = this.queue.splice(1, 1)[0]!;
      this.logger?.error(
        `${describe(dropped.event)} dropped: ${this.queueLimit} events wait for the events stream already`,
      );
    }
    this.sending ??= this.send();
  }

  /** Events not acknowledged yet, the one being sent included. */
  pending(): number {
    return this.queue.length;
  }

  /**
   * Waits until every event published so far is stored, or `timeoutMs` passed. Resolves to the
   * number still waiting (0 when all landed).
   */
  async flush(timeoutMs: number): Promise<number> {
    const deadline = Date.now() + timeoutMs;
    while (this.sending !== undefined && Date.now() < deadline) {
      await Promise.race([this.sending, sleep(Math.max(0, deadline - Date.now()), undefined, { ref: false })]);
    }
    return this.queue.length;
  }

  /**
   * Gives the events still waiting up to `timeoutMs` to be stored, then closes (`close`), as a
   * service does when it shuts down. Resolves to the events dropped.
   */
  async drain(timeoutMs = EVENT_SHUTDOWN_FLUSH_MS): Promise<JobEvent[]> {
    await this.flush(timeoutMs);
    return this.close();
  }

  /**
   * Stops: events not stored by now are dropped, named in one error line, and returned. An
   * attempt already on its way may still land.
   */
  close(): JobEvent[] {
    this.closed = true;
    this.abort.abort();
    const dropped = this.queue.splice(0).map((q) => q.event);
    if (dropped.length > 0) {
      const some = dropped.slice(0, 5).map(describe).join(', ');
      this.logger?.error(
        `closed with ${dropped.length} event(s) the events stream never took: ${some}${dropped.length > 5 ? ', …' : ''}`,
      );
    }
    return dropped;
  }

  /** Sends the queue's head until it is empty or the publisher closed. */
  private async send(): Promise<void> {
    try {
      while (this.queue.length > 0 && !this.closed) {
        const head = this.queue[0]!;
        await this.deliver(head);
        if (this.queue[0] === head) this.queue.shift();
      }
    } finally {
      this.sending = undefined;
    }
  }

  /** Publishes one event until the stream acknowledges it, or the publisher is closed. */
  private async deliver(item: QueuedEvent): Promise<void> {
    const attempts = await retryWithBackoff(
      async (attempt) => {
        // Closed during the pause: nothing is sent.
        if (this.closed) return 0;
        await this.js.publish(SUBJECTS.events(item.event.jobId), item.data, {
          msgID: item.msgID,
          timeout: this.ackTimeoutMs,
        });
        return attempt;
      },
      {
        initialDelayMs: this.retryMinMs,
        maxDelayMs: this.retryMaxMs,
        signal: this.abort.signal,
        shouldRetry: (err, _delayMs, attempt) => this.retriable(item, err, attempt),
      },
    ).catch(() => 0);
    if (attempts > 1) this.logger?.log(`${describe(item.event)} published after ${attempts} attempts`);
  }

  /**
   * Whether a failed attempt at `item` is tried again: not once the publisher is closed, nor on a
   * connection that can never publish again (the publisher closes then), nor for an event the
   * connection may not publish (it is dropped).
   */
  private retriable(item: QueuedEvent, err: unknown, attempt: number): boolean {
    if (this.closed) return false;
    if (err instanceof errors.ClosedConnectionError || err instanceof errors.DrainingConnectionError) {
      this.logger?.error(`publishing ${describe(item.event)} failed: ${err.message}; giving up`);
      this.close();
      return false;
    }
    if (err instanceof errors.PermissionViolationError) {
      this.logger?.error(`${describe(item.event)} dropped: ${err.message}`);
      return false;
    }
    if (attempt === 1) {
      this.logger?.warn(
        `publishing ${describe(item.event)} failed (${err instanceof Error ? err.message : String(err)}); ` +
          'retrying until the events stream takes it',
      );
    }
    return true;
  }
}

/** "the stopped event of job x", for log lines. */
function describe(event: JobEvent): string {
  return `the ${event.type} event of job ${event.jobId}`;
}
