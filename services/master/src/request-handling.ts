import type { Logger } from '@nestjs/common';
import type { Msg } from '@nats-io/transport-node';
import { MalformedMessageError, encodeJson, type NatsConnection } from '#libs/messaging';

/** A request/reply subscription: `stop()` ends it at once. */
export interface Responder {
  stop(): void;
}

/**
 * Serves requests on `subject` in the queue group `master`. A handler's value is the reply,
 * sent only while `leading()` still says so: a master that lost the lease meanwhile leaves the
 * request unanswered and the requester retries it with the new leader. Bad input
 * (`MalformedMessageError`) is logged as a warning naming the subject and answered with
 * `{error}`; any other failure is logged and left unanswered, so the requester retries.
 */
export function serveRequests(
  nc: NatsConnection,
  subject: string,
  logger: Logger,
  leading: () => boolean,
  handle: (msg: Msg) => Promise<unknown>,
): Responder {
  const respond = (msg: Msg, reply: unknown) => {
    if (msg.reply && leading()) msg.respond(encodeJson(reply));
  };
  const sub = nc.subscribe(subject, {
    queue: 'master',
    callback: (err, msg) => {
      if (err) {
        logger.warn(`subscription to ${subject} failed: ${err.message}`);
        return;
      }
      if (!leading()) return;
      handle(msg)
        .then((reply) => respond(msg, reply))
        .catch((error: Error) => {
          if (error instanceof MalformedMessageError) {
            logger.warn(`refusing a request on ${msg.subject}: ${error.message}`);
            respond(msg, { error: error.message });
          } else {
            logger.error(`request on ${msg.subject} failed: ${error.message}; left unanswered`);
          }
        });
    },
  });
  return { stop: () => sub.unsubscribe() };
}
