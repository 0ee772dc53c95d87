import { JetStreamApiError, jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { errors, type NatsConnection } from '@nats-io/transport-node';
import { sleep } from '#libs/retry';

/** How long to wait for JetStream to answer before giving up (a cluster electing its meta leader). */
export const JETSTREAM_READY_TIMEOUT_MS = 60_000;
/** Pause between two JetStream readiness probes. */
export const JETSTREAM_READY_POLL_MS = 250;

/** JetStream did not answer an account info request within the time allowed. */
export class JetStreamUnavailableError extends Error {
  override readonly name = 'JetStreamUnavailableError';
}

/**
 * Resolves with a JetStream manager once JetStream answers an account info request. A NATS
 * cluster that has just started (or lost its meta leader) refuses JetStream requests for a few
 * seconds; one server with JetStream answers at once.
 * @throws JetStreamUnavailableError naming the last refusal after `timeoutMs`.
 */
export async function waitForJetStream(
  nc: NatsConnection,
  timeoutMs = JETSTREAM_READY_TIMEOUT_MS,
): Promise<JetStreamManager> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const jsm = await jetstreamManager(nc, { checkAPI: false });
      await jsm.getAccountInfo();
      return jsm;
    } catch (cause) {
      if (Date.now() >= deadline) {
        throw new JetStreamUnavailableError(
          `JetStream did not answer within ${timeoutMs} ms (${(cause as Error).message}); is the server started with JetStream, and has its cluster a quorum?`,
          { cause },
        );
      }
      await sleep(JETSTREAM_READY_POLL_MS);
    }
  }
}

/** JetStream's API code for "JetStream system temporarily unavailable" (a cluster between leaders). */
const JS_TEMPORARILY_UNAVAILABLE = 10008;

/**
 * Whether `err` is what a NATS cluster answers while JetStream settles: no server answers the
 * API yet (nats.js calls that "jetstream is not enabled"), a request timed out, or the system is
 * temporarily unavailable. Not a refusal of the request itself.
 */
export function isJetStreamSettling(err: unknown): boolean {
  if (err instanceof errors.TimeoutError) return true;
  if (err instanceof JetStreamApiError) return err.code === JS_TEMPORARILY_UNAVAILABLE || err.status === 503;
  return err instanceof Error && err.name === 'JetStreamNotEnabled';
}

/**
 * Runs `declare` (creating streams or buckets), again while JetStream is settling (see
 * {@link isJetStreamSettling}): a cluster that has just elected its meta leader may still refuse
 * a stream's creation for a moment after it answered an account info request.
 * @throws the last error once `timeoutMs` is spent, or at once any error of another kind.
 */
export async function whileJetStreamSettles<T>(
  declare: () => Promise<T>,
  timeoutMs = JETSTREAM_READY_TIMEOUT_MS,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await declare();
    } catch (err) {
      if (!isJetStreamSettling(err) || Date.now() >= deadline) throw err;
      await sleep(JETSTREAM_READY_POLL_MS);
    }
  }
}
