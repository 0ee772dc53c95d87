import type { Logger } from '@nestjs/common';
import {
  AckPolicy,
  DeliverPolicy,
  JetStreamApiError,
  type ConsumerMessages,
  type JetStreamManager,
  type JsMsg,
} from '@nats-io/jetstream';

/**
 * How long a message taken for handling may stay unacknowledged before JetStream delivers it
 * again. Short, so a message held by a master that died goes to the next leader soon; a
 * handler that takes longer keeps it with progress heartbeats.
 */
export const PULL_ACK_WAIT_MS = 10_000;

/** While a message is being handled, JetStream is told this often that work on it goes on. */
export const PULL_HEARTBEAT_MS = 3_000;

/** Delay before a message whose handling failed is delivered again. */
export const RETRY_DELAY_MS = 2_000;

/**
 * Takes the messages of one durable pull consumer, one at a time, and hands each to a handler
 * that acks it. A handler that throws has its message delivered again after a delay. It can be
 * stopped and started again (a master leaving and retaking office); a message that arrives
 * while it stops is handed back at once.
 */
export class DurablePull {
  private messages: ConsumerMessages | undefined;
  private loop: Promise<void> | undefined;
  private stopping = false;

  constructor(
    private readonly jsm: JetStreamManager,
    private readonly stream: string,
    private readonly durable: string,
    private readonly logger: Logger,
  ) {}

  /** Creates the consumer if it is missing and starts handling its messages. */
  async start(handle: (msg: JsMsg) => Promise<void>): Promise<void> {
    this.stopping = false;
    await this.ensureConsumer();
    const consumer = await this.jsm.jetstream().consumers.get(this.stream, this.durable);
    const messages = await consumer.consume({ max_messages: 1 });
    this.messages = messages;
    this.loop = (async () => {
      for await (const msg of messages) {
        if (this.stopping) {
          msg.nak();
          continue;
        }
        await this.handleOne(msg, handle);
      }
    })();
  }

  /** Stops taking messages and waits for the one being handled. */
  async stop(): Promise<void> {
    this.stopping = true;
    const messages = this.messages;
    const loop = this.loop;
    this.messages = undefined;
    this.loop = undefined;
    await messages?.close();
    await loop;
  }

  private async handleOne(msg: JsMsg, handle: (msg: JsMsg) => Promise<void>): Promise<void> {
    const heartbeat = setInterval(() => msg.working(), PULL_HEARTBEAT_MS);
    try {
      await handle(msg);
    } catch (err) {
      this.logger.error(
        `handling message #${msg.seq} on ${msg.subject} failed: ${(err as Error).message}; it will be delivered again`,
      );
      msg.nak(RETRY_DELAY_MS);
    } finally {
      clearInterval(heartbeat);
    }
  }

  private async ensureConsumer(): Promise<void> {
    const ackWaitNs = PULL_ACK_WAIT_MS * 1e6;
    try {
      await this.jsm.consumers.add(this.stream, {
        durable_name: this.durable,
        ack_policy: AckPolicy.Explicit,
        deliver_policy: DeliverPolicy.All,
        ack_wait: ackWaitNs,
      });
    } catch (err) {
      // It exists with another configuration (an older master's): keep it, with this ack wait.
      if (!(err instanceof JetStreamApiError)) throw err;
      const info = await this.jsm.consumers.info(this.stream, this.durable);
      if (info.config.ack_wait !== ackWaitNs) {
        await this.jsm.consumers.update(this.stream, this.durable, { ack_wait: ackWaitNs });
      }
    }
  }
}
