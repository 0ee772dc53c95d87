import type { Logger } from '@nestjs/common';
import type { Msg } from '@nats-io/transport-node';
import { MalformedMessageError, encodeJson, type NatsConnection } from '#libs/messaging';

/** A request/reply subscription: `stop()` drains it. */
export interface Responder {
  stop(): Promise<void>;
}

/**
 * Serves requests on `subject` in the queue group `master`. A handler's value is the reply. Bad
 * input (`MalformedMessageError`) is logged as a warning naming the subject and answered with
 * `{error}`; any other failure is logged and left unanswered, so the requester retries.
 */
export function serveRequests(
  nc: NatsConnection,
  subject: string,
  logger: Logger,
  handle: (msg: Msg) => Promise<unknown>,
): Responder {
  const sub = nc.subscribe(subject, {
    queue: 'master',
    callback: (err, msg) => {
      if (err) {
        logger.warn(`subscription to ${subject} failed: ${err.message}`);
        return;
      }
      handle(msg)
        .then((reply) => {
          if (msg.reply) msg.respond(encodeJson(reply));
        })
        .catch((error: Error) => {
          if (error instanceof MalformedMessageError) {
            logger.warn(`refusing a request on ${msg.subject}: ${error.message}`);
            if (msg.reply) msg.respond(encodeJson({ error: error.message }));
          } else {
            logger.error(`request on ${msg.subject} failed: ${error.message}; left unanswered`);
          }
        });
    },
  });
  return { stop: () => sub.drain() };
}
