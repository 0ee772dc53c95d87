import type { Logger } from '@nestjs/common';
import {
  AckPolicy,
  DeliverPolicy,
  JetStreamApiError,
  type ConsumerMessages,
  type JetStreamManager,
  type JsMsg,
} from '@nats-io/jetstream';

/** How long a message taken for handling may stay unacknowledged before JetStream redelivers it. */
export const PULL_ACK_WAIT_MS = 120_000;

/** Delay before a message whose handling failed is delivered again. */
export const RETRY_DELAY_MS = 2_000;

/**
 * Takes the messages of one durable pull consumer, one at a time, and hands each to a handler
 * that acks it. A handler that throws has its message delivered again after a delay.
 */
export class DurablePull {
  private messages: ConsumerMessages | undefined;
  private loop: Promise<void> | undefined;

  constructor(
    private readonly jsm: JetStreamManager,
    private readonly stream: string,
    private readonly durable: string,
    private readonly logger: Logger,
  ) {}

  /** Creates the consumer if it is missing and starts handling its messages. */
  async start(handle: (msg: JsMsg) => Promise<void>): Promise<void> {
    try {
      await this.jsm.consumers.add(this.stream, {
        durable_name: this.durable,
        ack_policy: AckPolicy.Explicit,
        deliver_policy: DeliverPolicy.All,
        ack_wait: PULL_ACK_WAIT_MS * 1e6,
      });
    } catch (err) {
      // It exists with another configuration (an older master's): use it as it is.
      if (!(err instanceof JetStreamApiError)) throw err;
      await this.jsm.consumers.info(this.stream, this.durable);
    }
    const consumer = await this.jsm.jetstream().consumers.get(this.stream, this.durable);
    const messages = await consumer.consume({ max_messages: 1 });
    this.messages = messages;
    this.loop = (async () => {
      for await (const msg of messages) {
        try {
          await handle(msg);
        } catch (err) {
          this.logger.error(
            `handling message #${msg.seq} on ${msg.subject} failed: ${(err as Error).message}; it will be delivered again`,
          );
          msg.nak(RETRY_DELAY_MS);
        }
      }
    })();
  }

  /** Stops taking messages and waits for the one being handled. */
  async stop(): Promise<void> {
    await this.messages?.close();
    await this.loop;
  }
}
